"""The storm of `test_kill_storm` on valkey-glide's cluster client: the
node keepers (standalone glide clients, which reconnect silently), the
waits' and the tracking connections (redis-py, subscribed) are killed at
random while threads or tasks take and release two locks and a
semaphore."""

import pytest

glide_sync = pytest.importorskip("glide_sync")
glide_async = pytest.importorskip("glide")
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

import padlock.aio  # noqa: E402
from padlock import glide  # noqa: E402
from test_kill_storm import task_storm, thread_storm  # noqa: E402

KINDS = ("normal", "pubsub")


def test_glide_cluster_threads_through_a_storm(cluster_server):
    r = cluster_server.client()
    cfg = glide_sync.GlideClusterClientConfiguration([glide_sync.NodeAddress("127.0.0.1", cluster_server.port)])
    thread_storm(cluster_server, r, glide(glide_sync.GlideClusterClient, cfg), KINDS)
    r.close()


def test_glide_cluster_tasks_through_a_storm(cluster_server):
    r = cluster_server.client()
    cfg = glide_async.GlideClusterClientConfiguration([glide_async.NodeAddress("127.0.0.1", cluster_server.port)])
    task_storm(cluster_server, r, lambda: padlock.aio.glide(glide_async.GlideClusterClient, cfg), KINDS)
    r.close()
