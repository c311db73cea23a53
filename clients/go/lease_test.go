package padlock

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

func TestPlainAndBoundedLeases(t *testing.T) {
	onEachDriver(t, func(t *testing.T, s *server, p *Client) {
		r, ctx := s.raw(t), context.Background()
		// NoRenew: a plain lease, gone one ttl after the acquire.
		plain := p.Lock("plain", TTL(200*time.Millisecond), NoRenew())
		held, err := plain.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := info(t, r, "LOCK.INFO", "plain")["keep"]; got != int64(0) {
			t.Fatalf("keep %v for a plain lease", got)
		}
		eventually(t, time.Second, "the plain lease runs out", func() bool {
			n, _ := r.Exists(ctx, "plain").Result()
			return n == 0
		})
		if plain.Held(held) {
			t.Fatal("Held after the plain lease ran out")
		}
		// MaxHold: renewed, then lost once held that long.
		bounded := p.Lock("bounded", TTL(300*time.Millisecond), MaxHold(600*time.Millisecond))
		held, err = bounded.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(450 * time.Millisecond)
		if !bounded.Held(held) {
			t.Fatal("a bounded hold is renewed past its first ttl")
		}
		within(t, 2*time.Second, "lost past MaxHold", held.Done())
		if !errors.Is(context.Cause(held), ErrLost) {
			t.Fatalf("cause %v", context.Cause(held))
		}
		eventually(t, time.Second, "its lease ran out", func() bool {
			n, _ := r.Exists(ctx, "bounded").Result()
			return n == 0
		})
	})
}

// A ttl the server cannot keep is refused before anything is sent, for
// waits and tries alike; without renewal it is a plain short lease.
func TestATTLUnderTheKeepFloorIsRefusedUpFront(t *testing.T) {
	s := startServer(t)
	p, r, ctx := s.client(t, "go-redis"), s.raw(t), context.Background()
	short := p.Lock("short", TTL(100*time.Millisecond))
	if _, err := short.Acquire(ctx); !errors.Is(err, errTTL) {
		t.Fatalf("Acquire: %v", err)
	}
	if _, _, err := short.TryAcquire(ctx); !errors.Is(err, errTTL) {
		t.Fatalf("TryAcquire: %v", err)
	}
	if n, _ := r.Exists(ctx, "short").Result(); n != 0 {
		t.Fatal("a refused acquire took the key")
	}
	held, err := p.Lock("short", TTL(100*time.Millisecond), NoRenew()).Acquire(ctx)
	if err != nil || held == nil {
		t.Fatalf("a plain 100 ms lease: %v", err)
	}
}

// A thousand holds are watched by one goroutine, not one each.
func TestNoGoroutinePerHold(t *testing.T) {
	s := startServer(t)
	p, ctx := s.client(t, "go-redis"), context.Background()
	before := runtime.NumGoroutine()
	for i := range 1000 {
		if _, err := p.Lock("g:"+itoa(int64(i)), TTL(30*time.Second)).Acquire(ctx); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if extra := runtime.NumGoroutine() - before; extra > 20 {
		t.Fatalf("%d goroutines for 1,000 holds", extra)
	}
}

// A lock granted after a wait longer than its ttl is held at once, with its
// fence: its lease is known to live from the binding's last sign of life.
func TestHeldRightAfterALongWait(t *testing.T) {
	onEachDriver(t, func(t *testing.T, s *server, p *Client) {
		ctx := context.Background()
		l := p.Lock("long", TTL(time.Second))
		first, err := l.Acquire(WithHolder(ctx, "first"))
		if err != nil {
			t.Fatal(err)
		}
		type seen struct {
			held  bool
			fence int64
			err   error
		}
		got := make(chan seen, 1)
		go func() {
			held, err := l.Acquire(ctx)
			if err != nil {
				got <- seen{err: err}
				return
			}
			f, _ := l.Fence(held)
			got <- seen{held: l.Held(held), fence: f}
			_ = l.Release(held)
		}()
		time.Sleep(1500 * time.Millisecond)
		_ = l.Release(first)
		r := <-got
		if r.err != nil || !r.held || r.fence <= 0 {
			t.Fatalf("right after a long wait: held %v, fence %d, err %v", r.held, r.fence, r.err)
		}
	})
}

// Issue 39's uncontended path: an acquire adds its first round without
// waking the watcher (unless it is the earliest), and released holds'
// rounds are dropped in bulk instead of waking it once each when due.
func TestAnAcquireWakesNoWatcher(t *testing.T) {
	onEachDriver(t, func(t *testing.T, s *server, p *Client) {
		ctx := context.Background()
		anchor := p.Lock("wake:anchor", TTL(30*time.Second))
		held, err := anchor.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
		l := p.Lock("wake:k", TTL(60*time.Second))
		p.w.mu.Lock()
		wakes := p.w.wakes
		p.w.mu.Unlock()
		for range 1000 {
			h, err := l.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := l.Release(h); err != nil {
				t.Fatal(err)
			}
		}
		p.w.mu.Lock()
		woke, queued := p.w.wakes-wakes, len(p.w.q)
		p.w.mu.Unlock()
		if woke >= 20 {
			t.Fatalf("the watcher woke %d times for 1,000 acquires", woke)
		}
		if queued > 130 {
			t.Fatalf("%d rounds queued: released holds' rounds are not purged", queued)
		}
		if err := anchor.Release(held); err != nil {
			t.Fatal(err)
		}
	})
}
