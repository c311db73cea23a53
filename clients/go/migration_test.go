package padlock

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// A caller waiting when its key's slot starts to move (an atomic slot
// migration: Redis 8.4+ or Valkey 9+) is told to wait again, follows the
// slot to its new owner (MOVED), queues there and is granted there.
func TestAWaitFollowsAnAtomicSlotMigration(t *testing.T) {
	bin := os.Getenv("PADLOCK_ASM_SERVER")
	if bin == "" {
		t.Skip("PADLOCK_ASM_SERVER names a Redis 8.4+ or Valkey 9+ server (make test sets it)")
	}
	nodes := startClusterOf(t, bin)
	ctx := context.Background()
	version, _ := nodes[0].raw(t).Do(ctx, "INFO", "server").Text()
	valkey := strings.Contains(version, "valkey_version")
	for name, c := range clusterClients(t, nodes) {
		t.Run(name, func(t *testing.T) {
			key := fmt.Sprintf("{asm-%s}k", name)
			src := slotOwner(nodes, key)
			dst := nodes[0]
			if dst == src {
				dst = nodes[1]
			}
			slot := int(keySlot(key))
			r, d := src.raw(t), dst.raw(t)
			pipe := r.Pipeline()
			for i := range 50_000 {
				pipe.Set(ctx, fmt.Sprintf("{asm-%s}fill:%d", name, i), "xxxxxxxxxxxxxxxxxxxx", 0)
			}
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
			if err := r.Do(ctx, "LOCK.ACQUIRE", key, "a", 60000).Err(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, 25*time.Second)
				defer cancel()
				l := c.Lock(key, TTL(30*time.Second))
				held, err := l.Acquire(wctx)
				if err == nil {
					err = l.Release(held)
				}
				done <- err
			}()
			waiters := func(n *server) int64 {
				got := info(t, n.raw(t), "LOCK.INFO", key)
				w, _ := got["waiters"].(int64)
				return w
			}
			eventually(t, 10*time.Second, "the caller waits on the source", func() bool { return waiters(src) == 1 })
			if valkey {
				id, _ := d.Do(ctx, "CLUSTER", "MYID").Text()
				if err := r.Do(ctx, "CLUSTER", "MIGRATESLOTS", "SLOTSRANGE", slot, slot, "NODE", id).Err(); err != nil {
					t.Fatal(err)
				}
			} else if err := d.Do(ctx, "CLUSTER", "MIGRATION", "IMPORT", slot, slot).Err(); err != nil {
				t.Fatal(err)
			}
			eventually(t, 30*time.Second, "the slot moved", func() bool {
				n, _ := r.DBSize(ctx).Result()
				e, err := d.Exists(ctx, key).Result()
				return err == nil && e == 1 && n == 0
			})
			eventually(t, 10*time.Second, "the caller queued on the new owner", func() bool { return waiters(dst) == 1 })
			if err := d.Do(ctx, "LOCK.RELEASE", key, "a").Err(); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the caller was not granted on the new owner")
			}
			if e, _ := d.Exists(ctx, key).Result(); e != 0 {
				t.Fatal("granted there and released there: the key is gone")
			}
		})
	}
}
