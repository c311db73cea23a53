package padlock

import (
	"context"
	"fmt"
	"sync"
)

// ---- Semaphore ----------------------------------------------------------------

// Semaphore is a counting semaphore (SEM.*): up to limit permits across
// holders, each holder with a lease of its own.
type Semaphore struct {
	c       *Client
	key     string
	limit   int64
	permits int64
	o       options
}

// Semaphore is the semaphore at key with limit permits; each Acquire takes
// one (see Permits).
func (c *Client) Semaphore(key string, limit int, opts ...Option) *Semaphore {
	return &Semaphore{c: c, key: key, limit: int64(limit), permits: 1, o: settle(opts)}
}

// Permits is a Semaphore whose acquires take n permits each.
func (s *Semaphore) Permits(n int) *Semaphore {
	cp := *s
	cp.permits = int64(n)
	return &cp
}

type semSpec struct {
	key            string
	limit, permits int64
}

func (s semSpec) id() string    { return fmt.Sprintf("sem\x00%s\x00%d", s.key, s.permits) }
func (s semSpec) route() string { return s.key }
func (s semSpec) acquire(holder string, ttl, blockMs int64, blocking bool) []any {
	return block([]any{"SEM.ACQUIRE", s.key, holder, itoa(s.limit), itoa(ttl), "PERMITS", itoa(s.permits)}, blockMs, blocking)
}
func (s semSpec) extends(holder string, ttl int64) [][]any {
	return [][]any{{"SEM.EXTEND", s.key, holder, itoa(ttl), "PERMITS", itoa(s.permits)}}
}
func (s semSpec) release(holder string) []any {
	return []any{"SEM.RELEASE", s.key, holder, "PERMITS", itoa(s.permits)}
}
func (s semSpec) releasedAll(reply any) bool { return allZero(reply) }

func (s *Semaphore) spec() semSpec { return semSpec{s.key, s.limit, s.permits} }

// Acquire takes the permits for ctx's holder, waiting first come, first
// served (a large request is not overtaken by later small ones).
func (s *Semaphore) Acquire(ctx context.Context) (context.Context, error) {
	held, reply, err := s.c.acquire(ctx, s.spec(), s.o, true)
	return acquired(ctx, held, reply, err)
}

// TryAcquire takes the permits if they are free now.
func (s *Semaphore) TryAcquire(ctx context.Context) (context.Context, bool, error) {
	held, reply, err := s.c.acquire(ctx, s.spec(), s.o, false)
	return held, err == nil && reply != nil, err
}

// Release gives back the permits of the acquire held stands for.
func (s *Semaphore) Release(held context.Context) error { return s.c.release(held, s.spec()) }

// Held reports whether held's holder holds these permits.
func (s *Semaphore) Held(held context.Context) bool {
	h := s.c.peek(held, s.spec())
	return h != nil && h.held()
}

// ---- RWLock -------------------------------------------------------------------

// RWLock is a fair read-write lock (RWLOCK.*): many readers or one writer;
// a holder that only reads may take the write lock (upgrade), and the
// writer may take read holds (downgrade).
type RWLock struct {
	c   *Client
	key string
	o   options
}

// RWLock is the read-write lock at key.
func (c *Client) RWLock(key string, opts ...Option) *RWLock {
	return &RWLock{c: c, key: key, o: settle(opts)}
}

type rwSpec struct{ key, mode string }

func (s rwSpec) id() string    { return "rw\x00" + s.key + "\x00" + s.mode }
func (s rwSpec) route() string { return s.key }
func (s rwSpec) acquire(holder string, ttl, blockMs int64, blocking bool) []any {
	return block([]any{"RWLOCK.ACQUIRE", s.key, holder, s.mode, itoa(ttl)}, blockMs, blocking)
}
func (s rwSpec) extends(holder string, ttl int64) [][]any {
	return [][]any{{"RWLOCK.EXTEND", s.key, holder, itoa(ttl)}}
}
func (s rwSpec) release(holder string) []any { return []any{"RWLOCK.RELEASE", s.key, holder, s.mode} }

// releasedAll: the reply is [reads, writes] the holder still has; this
// mode's hold is over when its count is 0.
func (s rwSpec) releasedAll(reply any) bool {
	list, ok := reply.([]any)
	if !ok || len(list) != 2 {
		return false
	}
	i := 0
	if s.mode == "WRITE" {
		i = 1
	}
	n, _ := asInt(list[i])
	return n == 0
}

// RLock takes a read hold, waiting as Lock.Acquire does.
func (rw *RWLock) RLock(ctx context.Context) (context.Context, error) {
	held, reply, err := rw.c.acquire(ctx, rwSpec{rw.key, "READ"}, rw.o, true)
	return acquired(ctx, held, reply, err)
}

// Lock takes the write hold (an upgrade when ctx's holder reads).
func (rw *RWLock) Lock(ctx context.Context) (context.Context, error) {
	held, reply, err := rw.c.acquire(ctx, rwSpec{rw.key, "WRITE"}, rw.o, true)
	return acquired(ctx, held, reply, err)
}

// TryRLock takes a read hold if it can now.
func (rw *RWLock) TryRLock(ctx context.Context) (context.Context, bool, error) {
	held, reply, err := rw.c.acquire(ctx, rwSpec{rw.key, "READ"}, rw.o, false)
	return held, err == nil && reply != nil, err
}

// TryLock takes the write hold if it can now.
func (rw *RWLock) TryLock(ctx context.Context) (context.Context, bool, error) {
	held, reply, err := rw.c.acquire(ctx, rwSpec{rw.key, "WRITE"}, rw.o, false)
	return held, err == nil && reply != nil, err
}

// RUnlock gives back a read hold.
func (rw *RWLock) RUnlock(held context.Context) error {
	return rw.c.release(held, rwSpec{rw.key, "READ"})
}

// Unlock gives back the write hold.
func (rw *RWLock) Unlock(held context.Context) error {
	return rw.c.release(held, rwSpec{rw.key, "WRITE"})
}

// ---- sync.Locker ------------------------------------------------------------

// Locker is the lock as a sync.Locker, for code that takes one (sync.Cond,
// a library's option). Its limits: Lock has no error to return, so it
// panics when the acquire fails (ctx ended, the server refused); each Lock
// is a holder of its own, so it excludes every other Lock, of this Locker
// too, and never reenters; a lost hold is seen only by Unlock's panic.
// Prefer Acquire and Release.
func (l *Lock) Locker(ctx context.Context) sync.Locker { return &locker{l: l, ctx: ctx} }

type locker struct {
	l    *Lock
	ctx  context.Context
	mu   sync.Mutex
	held context.Context
}

func (k *locker) Lock() {
	held, err := k.l.Acquire(WithHolder(k.ctx, NewHolder()))
	if err != nil {
		panic(fmt.Sprintf("padlock: Locker.Lock of %s: %v", k.l.key, err))
	}
	k.mu.Lock()
	k.held = held
	k.mu.Unlock()
}

func (k *locker) Unlock() {
	k.mu.Lock()
	held := k.held
	k.held = nil
	k.mu.Unlock()
	if held == nil {
		panic("padlock: Locker.Unlock of an unlocked lock")
	}
	if err := k.l.Release(held); err != nil {
		panic(fmt.Sprintf("padlock: Locker.Unlock of %s: %v", k.l.key, err))
	}
}
