// Package padlock is the Go client of padlock, the Redis module for
// distributed locking: reentrant locks with leases and fencing tokens,
// counting semaphores, read-write locks and all-or-nothing multi-key
// locks, with FIFO waits handed off inside the server and deadlock
// detection on its wait-for graph.
//
// The holder of a hold travels in a context.Context: the context an
// acquire returns carries it, an acquire with a context derived from it
// reenters, and it is cancelled (cause ErrLost) when the hold is lost.
// Two goroutines with unrelated contexts are two holders.
//
//	p, _ := padlock.New(redis.NewClient(&redis.Options{Addr: "localhost:6379"}))
//	l := p.Lock("order:1001", padlock.TTL(5*time.Second))
//	held, err := l.Acquire(ctx)
//	if err != nil {
//		return err
//	}
//	defer l.Release(held)
//	fence, _ := l.Fence(held)
//
// A Client keeps, per server, two connections of its own for any number of
// holds and waits (see docs/clients.md in the repository for what every
// padlock client promises).
package padlock
