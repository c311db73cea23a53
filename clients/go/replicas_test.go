package padlock

import (
	"context"
	"errors"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// startPair is a master and its replica, the replication stream flowing
// (it starts at the replica's first ACK).
func startPair(t *testing.T) (*server, *server) {
	m := startServer(t, "--repl-diskless-sync-delay", "0")
	r := startServer(t, "--replicaof", "127.0.0.1", strconv.Itoa(m.port))
	t.Cleanup(func() { _ = r.cmd.Process.Signal(syscall.SIGCONT) })
	mc, rc := m.raw(t), r.raw(t)
	ctx := context.Background()
	eventually(t, 20*time.Second, "the replica to catch up", func() bool {
		mc.Set(ctx, "probe", "1", 0)
		return rc.Exists(ctx, "probe").Val() == 1
	})
	mc.Del(ctx, "probe")
	return m, r
}

func TestReplicas(t *testing.T) {
	for _, d := range drivers {
		t.Run(d, func(t *testing.T) {
			m, r := startPair(t)
			p, ctx := m.client(t, d), context.Background()
			rc := r.raw(t)

			// Reported once the replica has the grant.
			l := p.Lock("job", TTL(5*time.Second), Replicas(1, 500*time.Millisecond))
			held, err := l.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if rc.Exists(ctx, "job").Val() != 1 {
				t.Fatal("reported before the replica had it")
			}
			if err := l.Release(held); err != nil {
				t.Fatal(err)
			}

			// A grant mailed after a wait is on the replica when reported.
			first, err := p.Lock("hot", TTL(5*time.Second)).Acquire(WithHolder(ctx, "first"))
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan string, 1)
			go func() {
				wctx, cancel := context.WithTimeout(WithHolder(ctx, "second"), 5*time.Second)
				defer cancel()
				second := p.Lock("hot", TTL(5*time.Second), Replicas(1, 500*time.Millisecond))
				h, err := second.Acquire(wctx)
				if err != nil {
					got <- err.Error()
					return
				}
				got <- info(t, rc, "LOCK.INFO", "hot")["holder"].(string)
				_ = second.Release(h)
			}()
			time.Sleep(200 * time.Millisecond)
			_ = p.Lock("hot").Release(first)
			if who := <-got; who != "second" {
				t.Fatalf("the replica had %q when the mailed grant was reported", who)
			}

			// A replica that does not answer: the grant is given back.
			_ = r.cmd.Process.Signal(syscall.SIGSTOP)
			short := p.Lock("job", TTL(5*time.Second), Replicas(1, 200*time.Millisecond))
			_, err = short.Acquire(ctx)
			if !errors.Is(err, ErrNotReplicated) || !errors.Is(err, ErrNotAcquired) {
				t.Fatalf("got %v, want ErrNotReplicated", err)
			}
			_, ok, err := short.TryAcquire(ctx)
			if ok || !errors.Is(err, ErrNotReplicated) {
				t.Fatalf("try: %v %v", ok, err)
			}
			if m.raw(t).Exists(ctx, "job").Val() != 0 {
				t.Fatal("a grant short of its replica stayed held")
			}
			// ReplicasWarnOnly keeps it.
			warn := p.Semaphore("pool", 2, TTL(5*time.Second), Replicas(1, 200*time.Millisecond), ReplicasWarnOnly())
			h, err := warn.Acquire(ctx)
			if err != nil || m.raw(t).Exists(ctx, "pool").Val() != 1 {
				t.Fatalf("warn-only did not keep the grant: %v", err)
			}
			if err := warn.Release(h); err != nil {
				t.Fatal(err)
			}
			_ = r.cmd.Process.Signal(syscall.SIGCONT)
		})
	}
}
