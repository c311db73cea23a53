package padlock

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valkey-io/valkey-go"
)

// startCluster is three masters on free loopback ports, the slots split
// between them.
func startCluster(t *testing.T) []*server {
	t.Helper()
	bin := os.Getenv("PADLOCK_SERVER")
	if bin == "" {
		bin = "redis-server"
	}
	return startClusterOf(t, bin)
}

// startClusterOf is three masters of the server binary bin.
func startClusterOf(t *testing.T, bin string) []*server {
	t.Helper()
	var nodes []*server
	for range 3 {
		nodes = append(nodes, startServerOf(t, bin, "--cluster-enabled", "yes", "--cluster-node-timeout", "5000",
			"--cluster-config-file", "nodes.conf"))
	}
	ctx := context.Background()
	ranges := [][2]int{{0, 5460}, {5461, 10922}, {10923, 16383}}
	for i, n := range nodes {
		r := n.raw(t)
		if err := r.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", ranges[i][0], ranges[i][1]).Err(); err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			if err := r.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", nodes[0].port).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	eventually(t, 20*time.Second, "the cluster agrees", func() bool {
		for _, n := range nodes {
			r := n.raw(t)
			text, _ := r.Do(ctx, "CLUSTER", "INFO").Text()
			slots, _ := r.Do(ctx, "CLUSTER", "SLOTS").Slice()
			if !strings.Contains(text, "cluster_state:ok") || len(slots) != 3 {
				return false
			}
		}
		return true
	})
	return nodes
}

func clusterClients(t *testing.T, nodes []*server) map[string]*Client {
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.addr())
	}
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	gr, err := New(rc)
	if err != nil {
		t.Fatal(err)
	}
	vc, err := valkey.NewClient(valkey.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	vk, err := NewValkey(vc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gr.Close(); _ = rc.Close(); _ = vk.Close(); vc.Close() })
	return map[string]*Client{"go-redis": gr, "valkey-go": vk}
}

// slotOwner is the node whose slots hold key.
func slotOwner(nodes []*server, key string) *server {
	s := int(keySlot(key))
	switch {
	case s <= 5460:
		return nodes[0]
	case s <= 10922:
		return nodes[1]
	}
	return nodes[2]
}

func TestClusterOnBothDrivers(t *testing.T) {
	nodes := startCluster(t)
	for name, p := range clusterClients(t, nodes) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			// Keys on every master.
			keys := []string{}
			seen := map[*server]bool{}
			for i := 0; len(seen) < 3; i++ {
				k := name + ":" + strconv.Itoa(i)
				if o := slotOwner(nodes, k); !seen[o] {
					seen[o] = true
					keys = append(keys, k)
				}
			}
			for _, k := range keys {
				l := p.Lock(k, TTL(time.Second))
				held, err := l.Acquire(ctx)
				if err != nil {
					t.Fatalf("%s: %v", k, err)
				}
				inner, ok, err := l.TryAcquire(held)
				if !ok || err != nil {
					t.Fatalf("%s: reentry %v %v", k, ok, err)
				}
				r := slotOwner(nodes, k).raw(t)
				if got := info(t, r, "LOCK.INFO", k)["count"]; got != int64(2) {
					t.Fatalf("%s: count %v on its master", k, got)
				}
				// A wait on another holder, served when the key is free.
				done := make(chan error, 1)
				go func() {
					wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					defer cancel()
					w, err := l.Acquire(wctx)
					if err == nil {
						err = l.Release(w)
					}
					done <- err
				}()
				eventually(t, 3*time.Second, "queued", func() bool {
					return info(t, r, "LOCK.INFO", k)["waiters"] == int64(1)
				})
				// Kept past its ttl while waited for.
				time.Sleep(1300 * time.Millisecond)
				if !l.Held(held) {
					t.Fatalf("%s: the lease ran out while held", k)
				}
				_ = l.Release(inner)
				_ = l.Release(held)
				if err := <-done; err != nil {
					t.Fatalf("%s: the waiter: %v", k, err)
				}
				// A wait past its deadline leaves the queue.
				held, _ = l.Acquire(ctx)
				wctx, cancel := context.WithTimeout(WithHolder(ctx, "late"), 200*time.Millisecond)
				_, err = l.Acquire(wctx)
				cancel()
				if !errors.Is(err, ErrNotAcquired) {
					t.Fatalf("%s: %v", k, err)
				}
				eventually(t, time.Second, "the wait left", func() bool {
					return info(t, r, "LOCK.INFO", k)["waiters"] == int64(0)
				})
				_ = l.Release(held)
			}
			m := p.MultiLock([]string{"{" + name + "}:1", "{" + name + "}:2"})
			held, err := m.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Release(held); err != nil {
				t.Fatal(err)
			}
		})
	}
}
