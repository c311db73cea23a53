package padlock

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxPoll is how long one BLMPOP waits at most.
const maxPoll = time.Second

// drain is how many mailed elements one read takes at most.
const drain = 100

// slot is one wait registered for its mailed outcome.
type slot struct {
	outcome chan string   // the mailed reply, once
	poke    chan struct{} // the mailbox connection failed: look again
}

// mailman reads one node's mailbox for every wait and kept hold of a
// Client: one goroutine BLMPOPs it and hands each element to the wait (its
// outcome) or the hold (-LOST) whose request-id starts it; between two it
// checks the keeper, once per poll. That check is all the watching the
// holds bound to the keeper cost (see fresh).
type mailman struct {
	b       backend
	k       *keeper
	box     string
	mu      sync.Mutex
	slots   map[string]*slot
	watched map[string]*hold
	running bool
	poll    time.Duration
	// epoch is bumped when the mailbox connection failed (the waits are
	// sent again).
	epoch atomic.Uint64
	// clearAt is the send time (mono) of the latest read that found the
	// mailbox empty: every loss posted before it was handed to its hold.
	clearAt atomic.Int64
	// In a cluster (tr set): the slots' mailboxes named so far, and the
	// send time of the tracking connection's latest ping (see hear).
	tr     tracking
	boxes  map[string]bool
	pinged time.Duration
}

func newMailman(b backend, k *keeper, tr tracking) *mailman {
	m := &mailman{b: b, k: k, box: "padlock:mailbox:" + requestID() + requestID()[:8],
		slots: map[string]*slot{}, watched: map[string]*hold{}, poll: maxPoll,
		tr: tr, boxes: map[string]bool{}}
	m.clearAt.Store(int64(never))
	return m
}

// fresh is since when the holds bound to the keeper with this mailbox are
// known to live: their binding was there when the keeper last answered,
// and no loss was posted before the mailbox was last read empty.
func (m *mailman) fresh() time.Duration {
	return time.Duration(min(m.k.aliveAt.Load(), m.clearAt.Load()))
}

func (m *mailman) register(rid string) *slot {
	s := &slot{outcome: make(chan string, 1), poke: make(chan struct{}, 1)}
	m.mu.Lock()
	m.slots[rid] = s
	m.startLocked()
	m.mu.Unlock()
	return s
}

func (m *mailman) forget(rid string) {
	m.mu.Lock()
	delete(m.slots, rid)
	m.mu.Unlock()
}

// watch hands a -LOST for rid to h; the mailbox is then read at least
// twice per interval.
func (m *mailman) watch(rid string, h *hold, interval time.Duration) {
	m.mu.Lock()
	m.watched[rid] = h
	m.poll = min(m.poll, max(interval/2, 20*time.Millisecond))
	m.startLocked()
	m.mu.Unlock()
}

func (m *mailman) unwatch(rids []string) {
	m.mu.Lock()
	for _, rid := range rids {
		delete(m.watched, rid)
	}
	m.mu.Unlock()
}

func (m *mailman) startLocked() {
	if !m.running {
		m.running = true
		go m.run()
	}
}

func (m *mailman) deliver(element string) {
	rid, outcome, _ := strings.Cut(element, " ")
	m.mu.Lock()
	s := m.slots[rid]
	h := m.watched[rid]
	m.mu.Unlock()
	switch {
	case s != nil:
		select {
		case s.outcome <- outcome:
		default:
		}
	case h != nil && strings.HasPrefix(outcome, "-LOST"):
		h.heardLost(outcome[1:])
	}
}

// handOut delivers what one read took, then lets the waits it woke run
// before the mailbox is read again: the next holder starts one write
// sooner (on 8 goroutines passing one lock, ~15 µs of each hand-off).
func (m *mailman) handOut(elements []any) {
	for _, e := range elements {
		m.deliver(fmt.Sprint(e))
	}
	if len(elements) > 0 {
		runtime.Gosched()
	}
}

func (m *mailman) run() {
	var w wire
	var t tracker
	defer func() {
		if w != nil {
			w.close()
		}
		if t != nil {
			t.close()
		}
	}()
	for {
		m.mu.Lock()
		if len(m.slots) == 0 && len(m.watched) == 0 {
			m.running = false
			m.mu.Unlock()
			return
		}
		poll := m.poll
		m.mu.Unlock()
		var err error
		if m.tr != nil {
			err = m.hear(&t, poll)
		} else {
			err = m.read(&w, poll)
		}
		if err != nil {
			if w != nil {
				w.close()
				w = nil
			}
			if t != nil {
				t.close()
				t = nil
			}
			m.epoch.Add(1)
			m.mu.Lock()
			for _, s := range m.slots {
				select {
				case s.poke <- struct{}{}:
				default:
				}
			}
			m.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// read waits up to poll for the mailbox and takes up to a hundred
// elements at once (BLMPOP: fewer than that means it is empty now, so a
// burst costs no second read), and checks the keeper when it was not heard
// from for a poll.
func (m *mailman) read(w *wire, poll time.Duration) error {
	if *w == nil {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		nw, err := m.b.open(ctx, m.k.node)
		cancel()
		if err != nil {
			return err
		}
		*w = nw
	}
	ctx, cancel := context.WithTimeout(context.Background(), poll+callTimeout)
	defer cancel()
	cmd := []any{"BLMPOP", strconv.FormatFloat(poll.Seconds(), 'f', 3, 64), "1", m.box, "LEFT", "COUNT", drain}
	for {
		sent := mono()
		got, err := (*w).do(ctx, cmd)
		if err != nil {
			return err
		}
		// [key, [element ...]], or nil: empty. A BLMPOP that timed out saw
		// it empty at its timeout, which cannot come before poll after the
		// send.
		var elements []any
		if pair, ok := got.([]any); ok && len(pair) == 2 {
			elements, _ = pair[1].([]any)
		} else if cmd[0] == "BLMPOP" {
			sent = min(sent+poll, mono())
		}
		m.handOut(elements)
		if len(elements) < drain {
			if int64(sent) > m.clearAt.Load() {
				m.clearAt.Store(int64(sent))
			}
			break
		}
		cmd = []any{"LMPOP", "1", m.box, "LEFT", "COUNT", drain}
	}
	if time.Duration(m.k.aliveAt.Load()) < mono()-poll {
		m.k.ping(callTimeout)
	}
	return nil
}
