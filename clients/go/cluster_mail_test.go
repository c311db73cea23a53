package padlock

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valkey-io/valkey-go"
)

func TestSlotTagsNameTheirSlots(t *testing.T) {
	for s := range 16384 {
		if got := keySlot("padlock:mailbox:x:{" + slotTag(uint16(s)) + "}"); got != uint16(s) {
			t.Fatalf("slot %d: the tag %q names %d", s, slotTag(uint16(s)), got)
		}
	}
}

// conns is the number of padlock's connections to a node (named so).
func conns(t *testing.T, r *redis.Client) int {
	list, err := r.ClientList(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(list, " name=padlock ")
}

// Issue 39 in a cluster: waits on keys of many slots on three masters go
// through a mailbox per slot, heard of through tracking: two connections
// of padlock's per node however many wait, and a loss is mailed.
func TestClusterWaitsShareTwoConnectionsPerNode(t *testing.T) {
	for _, driver := range []string{"go-redis", "valkey-go"} {
		t.Run(driver, func(t *testing.T) { clusterWaits(t, driver) })
	}
}

func clusterWaits(t *testing.T, driver string) {
	nodes := startCluster(t)
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.addr())
	}
	rc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer rc.Close()
	ctx := context.Background()
	if err := rc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return c.Ping(ctx).Err() }); err != nil {
		t.Fatal(err)
	}
	raws := make([]*redis.Client, len(nodes))
	for i, n := range nodes {
		raws[i] = n.raw(t)
	}
	p, err := New(rc)
	if driver == "valkey-go" {
		vc, verr := valkey.NewClient(valkey.ClientOption{InitAddress: addrs, DisableCache: true})
		if verr != nil {
			t.Fatal(verr)
		}
		defer vc.Close()
		p, err = NewValkey(vc)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	keys := make([]string, 30)
	for i := range keys {
		keys[i] = "cmail:" + strconv.Itoa(i)
	}
	var held []context.Context
	for _, k := range keys {
		h, err := p.Lock(k, TTL(5*time.Second)).Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, h)
	}
	const waiters = 300
	var wg sync.WaitGroup
	errs := make(chan error, waiters)
	for i := range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := p.Lock(keys[i%len(keys)], TTL(5*time.Second))
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			h, err := l.Acquire(wctx)
			if err == nil {
				err = l.Release(h)
			}
			errs <- err
		}()
	}
	queued := func() int64 {
		var n int64
		for _, k := range keys {
			n += asInt64(info(t, raws[slices.Index(nodes, slotOwner(nodes, k))], "LOCK.INFO", k)["waiters"])
		}
		return n
	}
	eventually(t, 15*time.Second, "every wait queued", func() bool { return queued() == waiters })
	for i, r := range raws {
		if got := conns(t, r); got < 1 || got > 2 {
			l, _ := r.ClientList(ctx).Result()
			t.Fatalf("node %d: %d connections of padlock's for %d waits\n%s", i, got, waiters, l)
		}
	}
	// A wait that times out hears so through its slot's mailbox.
	late, cancel := context.WithTimeout(WithHolder(ctx, "late"), 200*time.Millisecond)
	if _, err := p.Lock(keys[3], TTL(5*time.Second)).Acquire(late); !errors.Is(err, ErrNotAcquired) {
		t.Fatalf("a late wait: %v", err)
	}
	cancel()
	// Every tracking connection killed while the waits are queued: they are
	// sent again with their ids, and the mailboxes swept on new ones.
	if killed := killTrackers(t, raws); killed != len(nodes) {
		t.Fatalf("%d tracking connections killed, for %d masters", killed, len(nodes))
	}
	// A loss, heard from the slot's mailbox far sooner than a round.
	lostKey := keys[0]
	if err := raws[slices.Index(nodes, slotOwner(nodes, lostKey))].Del(ctx, lostKey).Err(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-held[0].Done():
	case <-time.After(1500 * time.Millisecond):
		t.Fatal("the loss was not heard")
	}
	for i, k := range keys[1:] {
		if err := p.Lock(k, TTL(5*time.Second)).Release(held[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var lmpop int
	for _, r := range raws {
		stats, _ := r.Info(ctx, "commandstats").Result()
		if strings.Contains(stats, "cmdstat_lmpop:") {
			lmpop++
		}
	}
	if lmpop != len(nodes) {
		t.Fatalf("mailboxes popped on %d of %d nodes", lmpop, len(nodes))
	}
}

// killTrackers kills padlock's tracking connections (flag t) on every
// node; how many it killed.
func killTrackers(t *testing.T, raws []*redis.Client) int {
	ctx := context.Background()
	killed := 0
	for _, r := range raws {
		list, err := r.ClientList(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
			fields := map[string]string{}
			for _, f := range strings.Fields(line) {
				if k, v, ok := strings.Cut(f, "="); ok {
					fields[k] = v
				}
			}
			if fields["name"] == "padlock" && strings.Contains(fields["flags"], "t") {
				if err := r.Do(ctx, "CLIENT", "KILL", "ID", fields["id"]).Err(); err != nil {
					t.Fatal(err)
				}
				killed++
			}
		}
	}
	return killed
}

func asInt64(v any) int64 {
	n, _ := v.(int64)
	return n
}
