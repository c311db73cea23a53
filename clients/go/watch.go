package padlock

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"
)

// watcher gives every renewed hold of a Client a round every third of its
// ttl, on one goroutine and one timer: no goroutine per hold. A round that
// must talk to the server runs on a goroutine of its own while it lasts.
type watcher struct {
	mu  sync.Mutex
	q   rounds
	seq int
	// purgeAt is the queue's length at which the rounds of holds released
	// since are dropped (twice what was left last time: O(1) per round).
	purgeAt int
	// wakes counts the times run looked at the queue (for tests).
	wakes int
	wake  chan struct{}
	done  chan struct{}
	close sync.Once
}

type round struct {
	at  time.Duration
	seq int
	h   *hold
	gen int
}

type rounds []round

func (r rounds) Len() int { return len(r) }
func (r rounds) Less(i, j int) bool {
	return r[i].at < r[j].at || (r[i].at == r[j].at && r[i].seq < r[j].seq)
}
func (r rounds) Swap(i, j int) { r[i], r[j] = r[j], r[i] }
func (r *rounds) Push(x any)   { *r = append(*r, x.(round)) }
func (r *rounds) Pop() any {
	old := *r
	x := old[len(old)-1]
	*r = old[:len(old)-1]
	return x
}

func newWatcher() *watcher {
	w := &watcher{wake: make(chan struct{}, 1), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *watcher) add(h *hold, at time.Duration, gen int) {
	w.mu.Lock()
	w.seq++
	heap.Push(&w.q, round{at: at, seq: w.seq, h: h, gen: gen})
	if len(w.q) >= max(w.purgeAt, 64) {
		w.purgeLocked()
	}
	// Only a round earlier than every other moves the time run sleeps
	// until: an acquire wakes no goroutine.
	earliest := w.q[0].seq == w.seq
	w.mu.Unlock()
	if earliest {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// purgeLocked drops the rounds of holds released (or watched anew) since
// they were added, which would each cost a wake-up when due.
func (w *watcher) purgeLocked() {
	live := w.q[:0]
	for _, r := range w.q {
		if r.h.watches(r.gen) {
			live = append(live, r)
		}
	}
	for i := len(live); i < len(w.q); i++ {
		w.q[i] = round{} // no reference kept to a dropped hold
	}
	w.q = live
	heap.Init(&w.q)
	w.purgeAt = 2 * len(w.q)
}

func (w *watcher) stop() { w.close.Do(func() { close(w.done) }) }

func (w *watcher) run() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		w.mu.Lock()
		w.wakes++
		var due []round
		for len(w.q) > 0 && w.q[0].at <= mono() {
			if r := heap.Pop(&w.q).(round); r.h.watches(r.gen) {
				due = append(due, r)
			}
		}
		next := time.Hour
		if len(w.q) > 0 {
			next = w.q[0].at - mono()
		}
		w.mu.Unlock()
		for _, r := range due {
			go func(r round) {
				if at, ok := r.h.round(r.gen); ok {
					w.add(r.h, at, r.gen)
				}
			}(r)
		}
		t.Reset(max(next, 0))
		select {
		case <-w.done:
			return
		case <-w.wake:
		case <-t.C:
		}
	}
}

// watches says whether rounds added as gen are still this hold's.
func (h *hold) watches(gen int) bool {
	h.st.Lock()
	defer h.st.Unlock()
	return gen == h.gen && h.depth > 0 && !h.dead
}

// round is one round of the watching that started as gen: when the next
// is due, or false when this hold needs no more.
func (h *hold) round(gen int) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.st.Lock()
	if gen != h.gen || h.depth == 0 || h.dead {
		h.st.Unlock()
		return 0, false
	}
	now := mono()
	pastMax := h.o.maxHold > 0 && now+h.ttl > h.heldSince+h.o.maxHold
	leaseUntil, mailed := h.leaseUntilLocked(), h.mailedLost
	h.st.Unlock()
	switch {
	case mailed != "":
		h.markLost(fmt.Errorf("%w: %s (%s)", ErrLost, h.s.route(), mailed))
		return 0, false
	case pastMax:
		// No renewal past MaxHold: the lease runs out, then the hold is lost.
		if now < leaseUntil {
			return leaseUntil, true
		}
		h.markLost(fmt.Errorf("%w: %s (held past MaxHold)", ErrLost, h.s.route()))
		return 0, false
	}
	if !h.look() && !h.renewLocked() {
		h.markLost(fmt.Errorf("%w: %s (its lease could not be renewed)", ErrLost, h.s.route()))
		return 0, false
	}
	return mono() + h.interval(), true
}

// look is the round of a hold bound with the mailbox on the live keeper:
// no command at all while the binding is known to outlast the next round.
func (h *hold) look() bool {
	return h.m != nil && h.leaseLeft() > h.interval() && h.isBoundWithMail()
}

func (h *hold) isBoundWithMail() bool {
	h.st.Lock()
	defer h.st.Unlock()
	return h.bound.ok && h.bound.mailbox && h.bound.epoch == h.k.epoch.Load()
}

// renewLocked resets the lease now (and binds it again with KEEP, with the
// mailbox where there is one). False when the hold is lost or was never
// held: any error but a lost hold is retried until the lease may have run
// out.
func (h *hold) renewLocked() bool { return h.renewUntil(0) }

// renewUntil is renewLocked retried until the deadline until (mono)
// instead, when it is not 0 (a grant just made).
func (h *hold) renewUntil(until time.Duration) bool {
	h.st.Lock()
	depth, lostFlag := h.depth, h.lostFlag
	h.st.Unlock()
	if depth == 0 || lostFlag {
		return false
	}
	start := mono()
	deadline := start + max(h.leaseLeft(), time.Millisecond)
	if until > 0 {
		deadline = until
	}
	var b binding
	for _, ext := range h.s.extends(h.holder, h.ttlMs()) {
		if h.o.keep {
			ext = append(ext, "KEEP")
			if h.m != nil {
				ext = append(ext, "MAILBOX", h.m.boxFor(fmt.Sprint(ext[1])))
			}
		}
		send := func(time.Duration) []any { return ext }
		_, got, err := h.send(context.Background(), send, phaseRenew, deadline, false)
		if err == nil && h.o.keep && !got.ok {
			// Answered to a resend: bound where the first sending went (a
			// connection since replaced). Once more, a new request.
			_, got, err = h.send(context.Background(), send, phaseRenew, deadline, false)
		}
		if err != nil {
			h.st.Lock()
			h.unsure = judge(translate(err), phaseRenew) != lost
			h.st.Unlock()
			return false
		}
		b = got
	}
	h.st.Lock()
	h.leaseUntil = start + h.ttl
	if h.o.keep {
		h.bound = b
	}
	h.st.Unlock()
	return true
}

// markLost: nothing is held any more, and nothing of it may stay bound;
// every context of the hold is cancelled with why.
func (h *hold) markLost(why error) {
	h.st.Lock()
	h.lostFlag = true
	unsure := h.unsure
	h.unsure = false
	h.st.Unlock()
	h.end(!unsure, why)
}
