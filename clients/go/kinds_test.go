package padlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestSemaphore(t *testing.T) {
	onEachDriver(t, func(t *testing.T, s *server, p *Client) {
		r, ctx := s.raw(t), context.Background()
		sem := p.Semaphore("pool:db", 3)
		two := sem.Permits(2)
		a, err := two.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := two.TryAcquire(ctx); ok {
			t.Fatal("2 more permits of 3 with 2 taken")
		}
		b, ok, err := sem.TryAcquire(ctx)
		if !ok || err != nil {
			t.Fatalf("the third permit: %v %v", ok, err)
		}
		// A waiter for 2 is served when 2 are free, first come first served.
		got := make(chan error, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			held, err := two.Acquire(wctx)
			if err == nil {
				err = two.Release(held)
			}
			got <- err
		}()
		eventually(t, 2*time.Second, "queued", func() bool {
			return info(t, r, "SEM.INFO", "pool:db")["waiters"] == int64(1)
		})
		_ = sem.Release(b)
		_ = two.Release(a)
		if err := <-got; err != nil {
			t.Fatal(err)
		}
		if got := info(t, r, "SEM.INFO", "pool:db"); got != nil && got["used"] != int64(0) {
			t.Fatalf("used %v after every release", got["used"])
		}
	})
}

func TestReadWriteLockUpgradeAndDowngrade(t *testing.T) {
	onEachDriver(t, func(t *testing.T, s *server, p *Client) {
		ctx := context.Background()
		rw := p.RWLock("cfg")
		r1, err := rw.RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r2, _ := rw.RLock(WithHolder(ctx, "other-reader"))
		if _, ok, _ := rw.TryLock(WithHolder(ctx, "writer")); ok {
			t.Fatal("a writer beside two readers")
		}
		// r1 upgrades once it is the only holder.
		up := make(chan error, 1)
		var w context.Context
		go func() {
			var err error
			w, err = rw.Lock(r1)
			up <- err
		}()
		time.Sleep(100 * time.Millisecond)
		_ = rw.RUnlock(r2)
		if err := <-up; err != nil {
			t.Fatalf("upgrade: %v", err)
		}
		if _, ok, _ := rw.TryRLock(WithHolder(ctx, "late-reader")); ok {
			t.Fatal("a reader beside the writer")
		}
		// Downgrade: the writer takes a read hold, then lets the write go.
		d, ok, err := rw.TryRLock(w)
		if !ok || err != nil {
			t.Fatalf("downgrade: %v %v", ok, err)
		}
		_ = rw.Unlock(w)
		if _, ok, _ := rw.TryRLock(WithHolder(ctx, "late-reader")); !ok {
			t.Fatal("readers come in once the writer only reads")
		}
		_ = rw.RUnlock(d)
		_ = rw.RUnlock(r1)
	})
}

func TestMultiLockIsAllOrNothing(t *testing.T) {
	onEachDriver(t, func(t *testing.T, s *server, p *Client) {
		r, ctx := s.raw(t), context.Background()
		one, _ := p.Lock("{acct}:2").Acquire(WithHolder(ctx, "other"))
		m := p.MultiLock([]string{"{acct}:1", "{acct}:2"})
		if _, ok, _ := m.TryAcquire(ctx); ok {
			t.Fatal("all keys with one of them held")
		}
		if n, _ := r.Exists(ctx, "{acct}:1").Result(); n != 0 {
			t.Fatal("a refused multi-lock took a key")
		}
		_ = p.Lock("{acct}:2").Release(one)
		held, err := m.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fences, ok := m.Fences(held)
		if !ok || len(fences) != 2 || fences[0] == fences[1] {
			t.Fatalf("fences %v", fences)
		}
		_ = m.Release(held)
		if n, _ := r.Exists(ctx, "{acct}:1", "{acct}:2").Result(); n != 0 {
			t.Fatal("keys left after the release")
		}
	})
}

// A thousand goroutines hold and a thousand wait, on the Client's two
// connections: the keeper and the mailbox reader.
func TestThousandsOnTwoConnections(t *testing.T) {
	onEachDriver(t, func(t *testing.T, s *server, p *Client) {
		r, ctx := s.raw(t), context.Background()
		before := clients(t, r)
		const n = 1000
		var holds []context.Context
		for i := range n {
			held, err := p.Lock(fmt.Sprintf("k:%d", i), TTL(30*time.Second)).Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			holds = append(holds, held)
		}
		hot := p.Lock("hot", TTL(30*time.Second))
		first, _ := hot.Acquire(ctx)
		var wg sync.WaitGroup
		var order []int
		var mu sync.Mutex
		var failed atomic.Int32
		for i := range n {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				held, err := hot.Acquire(ctx)
				if err != nil {
					failed.Add(1)
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				_ = hot.Release(held)
			}(i)
		}
		eventually(t, 20*time.Second, "every waiter queued", func() bool {
			return info(t, r, "LOCK.INFO", "hot")["waiters"] == int64(n)
		})
		if got := clients(t, r) - before; got > 2 {
			t.Fatalf("%d connections for %d holds and %d waiters, want 2", got, n, n)
		}
		_ = hot.Release(first)
		wg.Wait()
		if failed.Load() != 0 || len(order) != n {
			t.Fatalf("%d failed, %d served", failed.Load(), len(order))
		}
		for i, h := range holds {
			_ = p.Lock(fmt.Sprintf("k:%d", i)).Release(h)
		}
	})
}

// clients is the server's connected_clients.
func clients(t *testing.T, r *redis.Client) int {
	t.Helper()
	text, err := r.Info(context.Background(), "clients").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(text, "\r\n") {
		if v, ok := strings.CutPrefix(line, "connected_clients:"); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	t.Fatal("no connected_clients")
	return 0
}
