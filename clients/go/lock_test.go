package padlock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

// validateInventory locks the order its caller holds: with a context
// derived from the caller's it reenters instead of waiting for itself.
func validateInventory(ctx context.Context, p *Client, order string) error {
	l := p.Lock("order:"+order, TTL(5*time.Second))
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	held, err := l.Acquire(ctx)
	if err != nil {
		return err
	}
	return l.Release(held)
}

func processOrder(ctx context.Context, p *Client, order string, inside func(context.Context)) error {
	l := p.Lock("order:"+order, TTL(5*time.Second))
	held, err := l.Acquire(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = l.Release(held) }()
	inside(held)
	return validateInventory(held, p, order)
}

func TestNestedCallReentersThroughDerivedContexts(t *testing.T) {
	onEachDriver(t, testNestedReentry)
}

func testNestedReentry(t *testing.T, s *server, p *Client) {
	r := s.raw(t)
	ctx := context.Background()
	err := processOrder(ctx, p, "1001", func(held context.Context) {
		if got := info(t, r, "LOCK.INFO", "order:1001")["count"]; got != int64(1) {
			t.Errorf("count %v, want 1", got)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := r.Exists(ctx, "order:1001").Result(); n != 0 {
		t.Fatal("the outer release left the key")
	}
	// Counted as the server counts: the inner release leaves the outer hold.
	l := p.Lock("job")
	outer, _ := l.Acquire(ctx)
	inner, _ := l.Acquire(outer)
	if got := info(t, r, "LOCK.INFO", "job")["count"]; got != int64(2) {
		t.Fatalf("count %v after a reentry, want 2", got)
	}
	f1, _ := l.Fence(outer)
	f2, _ := l.Fence(inner)
	if f1 == 0 || f1 != f2 {
		t.Fatalf("fences %d and %d: a reentry keeps the fence", f1, f2)
	}
	if err := l.Release(inner); err != nil {
		t.Fatal(err)
	}
	if inner.Err() == nil || !errors.Is(context.Cause(inner), ErrReleased) {
		t.Fatal("a released acquire's context is cancelled with ErrReleased")
	}
	if !l.Held(outer) || outer.Err() != nil {
		t.Fatal("the outer hold stays")
	}
	_ = l.Release(outer)
	if err := l.Release(outer); !errors.Is(err, ErrNotHeld) {
		t.Fatalf("a second release: %v, want ErrNotHeld", err)
	}
}

func TestUnrelatedContextsNeverShare(t *testing.T) {
	onEachDriver(t, func(t *testing.T, s *server, p *Client) {
		testUnshared(t, p)
	})
}

func testUnshared(t *testing.T, p *Client) {
	l := p.Lock("shared")
	held, err := l.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var got bool
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, got, _ = l.TryAcquire(context.Background())
	}()
	wg.Wait()
	if got {
		t.Fatal("another goroutine's unrelated context got a held lock")
	}
	if _, ok, _ := l.TryAcquire(WithHolder(context.Background(), "someone")); ok {
		t.Fatal("another holder got a held lock")
	}
	// WithHolder shares one on purpose.
	h, _ := HolderFrom(held)
	again, ok, err := l.TryAcquire(WithHolder(context.Background(), h))
	if !ok || err != nil {
		t.Fatalf("the same holder, named: %v %v", ok, err)
	}
	_ = l.Release(again)
	_ = l.Release(held)
}

func TestWaitHonoursDeadlineAndCancellation(t *testing.T) {
	onEachDriver(t, testDeadlineAndCancel)
}

func testDeadlineAndCancel(t *testing.T, s *server, p *Client) {
	r := s.raw(t)
	l := p.Lock("busy")
	held, _ := l.Acquire(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := l.Acquire(ctx)
	if !errors.Is(err, ErrNotAcquired) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a wait past its deadline: %v", err)
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 3*time.Second {
		t.Fatalf("the wait took %v for a 200 ms deadline", d)
	}
	eventually(t, time.Second, "the server no longer lists the wait", func() bool {
		return info(t, r, "LOCK.INFO", "busy")["waiters"] == int64(0)
	})
	ctx2, cancel2 := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := l.Acquire(ctx2); done <- err }()
	eventually(t, 2*time.Second, "the wait is queued", func() bool {
		return info(t, r, "LOCK.INFO", "busy")["waiters"] == int64(1)
	})
	cancel2()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait: %v", err)
	}
	if n := info(t, r, "LOCK.INFO", "busy")["waiters"]; n != int64(0) {
		t.Fatalf("%v waiters left after the cancel", n)
	}
	_ = l.Release(held)
}

// A cancel racing the release that would grant it: the waiter told it
// did not get the lock never holds it.
func TestCancelRacingAGrantNeverLeavesAHold(t *testing.T) {
	onEachDriver(t, testCancelRace)
}

func testCancelRace(t *testing.T, s *server, p *Client) {
	r := s.raw(t)
	l := p.Lock("race")
	for i := range 30 {
		held, err := l.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		var got context.Context
		go func() {
			var err error
			got, err = l.Acquire(ctx)
			done <- err
		}()
		eventually(t, 2*time.Second, "queued", func() bool {
			return info(t, r, "LOCK.INFO", "race")["waiters"] == int64(1)
		})
		if i%2 == 0 {
			cancel()
			_ = l.Release(held)
		} else {
			_ = l.Release(held)
			cancel()
		}
		err = <-done
		if err == nil {
			_ = l.Release(got) // it won: it knows, and lets go
		}
		eventually(t, 2*time.Second, fmt.Sprintf("round %d: the key is free", i), func() bool {
			n, _ := r.Exists(context.Background(), "race").Result()
			return n == 0
		})
	}
}

func TestDeadlockNamesTheCycle(t *testing.T) {
	onEachDriver(t, func(t *testing.T, _ *server, p *Client) { testDeadlock(t, p) })
}

func testDeadlock(t *testing.T, p *Client) {
	a, b := p.Lock("a"), p.Lock("b")
	ha, _ := a.Acquire(WithHolder(context.Background(), "g1"))
	hb, _ := b.Acquire(WithHolder(context.Background(), "g2"))
	errs := make(chan error, 2)
	go func() { _, err := b.Acquire(ha); errs <- err }()
	time.Sleep(100 * time.Millisecond)
	go func() { _, err := a.Acquire(hb); errs <- err }()
	var d *DeadlockError
	if err := <-errs; !errors.As(err, &d) {
		t.Fatalf("the wait that closes the cycle: %v", err)
	}
	want := []string{"g2", "a", "g1", "b", "g2"}
	if fmt.Sprint(d.Cycle) != fmt.Sprint(want) {
		t.Fatalf("cycle %v, want %v", d.Cycle, want)
	}
	_ = b.Release(hb) // g1's wait is granted
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
}
