package padlock

import (
	"context"
	"fmt"
	"strconv"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func block(args []any, blockMs int64, blocking bool) []any {
	if !blocking {
		return args
	}
	return append(args, "BLOCK", itoa(blockMs))
}

func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case string:
		i, err := strconv.ParseInt(n, 10, 64)
		return i, err == nil
	}
	return 0, false
}

func allZero(v any) bool {
	list, ok := v.([]any)
	if !ok {
		n, ok := asInt(v)
		return ok && n == 0
	}
	for _, x := range list {
		if n, _ := asInt(x); n != 0 {
			return false
		}
	}
	return true
}

// acquired turns an acquire's outcome into the API's: a nil reply after a
// wait is ErrNotAcquired (with the context's error when it ended).
func acquired(ctx context.Context, held context.Context, reply any, err error) (context.Context, error) {
	if err != nil && isContext(err) && ctx.Err() != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotAcquired, err)
	}
	if err != nil {
		return nil, err
	}
	if reply == nil {
		if e := ctx.Err(); e != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotAcquired, e)
		}
		return nil, fmt.Errorf("%w: %w", ErrNotAcquired, context.DeadlineExceeded)
	}
	return held, nil
}

// ---- Lock -------------------------------------------------------------------

// Lock is a reentrant lock with a lease and a fencing token (LOCK.*).
type Lock struct {
	c   *Client
	key string
	o   options
}

// Lock is the lock at key.
func (c *Client) Lock(key string, opts ...Option) *Lock {
	return &Lock{c: c, key: key, o: settle(opts)}
}

type lockSpec struct{ key string }

func (s lockSpec) id() string    { return "lock\x00" + s.key }
func (s lockSpec) route() string { return s.key }
func (s lockSpec) acquire(holder string, ttl, blockMs int64, blocking bool) []any {
	return block([]any{"LOCK.ACQUIRE", s.key, holder, itoa(ttl)}, blockMs, blocking)
}
func (s lockSpec) extends(holder string, ttl int64) [][]any {
	return [][]any{{"LOCK.EXTEND", s.key, holder, itoa(ttl)}}
}
func (s lockSpec) release(holder string) []any { return []any{"LOCK.RELEASE", s.key, holder} }
func (s lockSpec) releasedAll(reply any) bool  { return allZero(reply) }

// Acquire takes the lock for ctx's holder (a fresh one when ctx carries
// none), waiting in the server's FIFO queue until ctx's deadline or
// cancellation (the server then drops the wait). The context it returns
// carries the holder, so an Acquire with a context derived from it
// reenters; it is cancelled (cause ErrLost) when the hold is lost, and
// (cause ErrReleased) when this acquire is released.
func (l *Lock) Acquire(ctx context.Context) (context.Context, error) {
	held, reply, err := l.c.acquire(ctx, lockSpec{l.key}, l.o, true)
	return acquired(ctx, held, reply, err)
}

// TryAcquire takes the lock if it is free now (or reenters); ok is false
// when another holder has it.
func (l *Lock) TryAcquire(ctx context.Context) (held context.Context, ok bool, err error) {
	held, reply, err := l.c.acquire(ctx, lockSpec{l.key}, l.o, false)
	return held, err == nil && reply != nil, err
}

// Release gives back the acquire held stands for. ErrNotHeld when ctx
// holds nothing here; both ErrNotHeld and ErrLost when the hold was lost.
func (l *Lock) Release(held context.Context) error { return l.c.release(held, lockSpec{l.key}) }

// Fence is the hold's fencing token, when held's holder holds the lock:
// pass it to storage that refuses older ones.
func (l *Lock) Fence(held context.Context) (int64, bool) {
	return fenceOf(l.c.peek(held, lockSpec{l.key}))
}

// Held reports whether held's holder holds the lock and its lease cannot
// have run out.
func (l *Lock) Held(held context.Context) bool {
	h := l.c.peek(held, lockSpec{l.key})
	return h != nil && h.held()
}

func fenceOf(h *hold) (int64, bool) {
	if h == nil || !h.held() {
		return 0, false
	}
	h.st.Lock()
	defer h.st.Unlock()
	return asInt(h.reply)
}

// ---- MultiLock --------------------------------------------------------------

// MultiLock is several locks taken all at once or not at all
// (LOCK.MACQUIRE). In a cluster the keys must share a {hash tag}.
type MultiLock struct {
	c    *Client
	keys []string
	o    options
}

// MultiLock is the locks at keys, taken together.
func (c *Client) MultiLock(keys []string, opts ...Option) *MultiLock {
	return &MultiLock{c: c, keys: append([]string{}, keys...), o: settle(opts)}
}

type multiSpec struct{ keys []string }

func (s multiSpec) id() string {
	id := "multi"
	for _, k := range s.keys {
		id += "\x00" + k
	}
	return id
}
func (s multiSpec) route() string { return s.keys[0] }
func (s multiSpec) head(cmd string) []any {
	args := []any{cmd, itoa(int64(len(s.keys)))}
	for _, k := range s.keys {
		args = append(args, k)
	}
	return args
}
func (s multiSpec) acquire(holder string, ttl, blockMs int64, blocking bool) []any {
	return block(append(s.head("LOCK.MACQUIRE"), holder, itoa(ttl)), blockMs, blocking)
}
func (s multiSpec) extends(holder string, ttl int64) [][]any {
	var out [][]any
	for _, k := range s.keys {
		out = append(out, []any{"LOCK.EXTEND", k, holder, itoa(ttl)})
	}
	return out
}
func (s multiSpec) release(holder string) []any { return append(s.head("LOCK.MRELEASE"), holder) }
func (s multiSpec) releasedAll(reply any) bool  { return allZero(reply) }

// Acquire takes every key or none, waiting as Lock.Acquire does.
func (m *MultiLock) Acquire(ctx context.Context) (context.Context, error) {
	if len(m.keys) == 0 {
		return nil, fmt.Errorf("padlock: a MultiLock needs at least one key")
	}
	held, reply, err := m.c.acquire(ctx, multiSpec{m.keys}, m.o, true)
	return acquired(ctx, held, reply, err)
}

// TryAcquire takes every key now, or none.
func (m *MultiLock) TryAcquire(ctx context.Context) (context.Context, bool, error) {
	if len(m.keys) == 0 {
		return nil, false, fmt.Errorf("padlock: a MultiLock needs at least one key")
	}
	held, reply, err := m.c.acquire(ctx, multiSpec{m.keys}, m.o, false)
	return held, err == nil && reply != nil, err
}

// Release gives back one hold of every key.
func (m *MultiLock) Release(held context.Context) error { return m.c.release(held, multiSpec{m.keys}) }

// Fences are the keys' fencing tokens, in order, while held.
func (m *MultiLock) Fences(held context.Context) ([]int64, bool) {
	h := m.c.peek(held, multiSpec{m.keys})
	if h == nil || !h.held() {
		return nil, false
	}
	h.st.Lock()
	defer h.st.Unlock()
	list, _ := h.reply.([]any)
	out := make([]int64, 0, len(list))
	for _, f := range list {
		n, _ := asInt(f)
		out = append(out, n)
	}
	return out, true
}
