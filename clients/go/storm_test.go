package padlock

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Holds and waits of many goroutines while the server kills the client's
// connections at random (the keeper with the holds bound to it and the
// waits queued on it, the mailbox reader): Acquire never answers a grant
// that Held denies, at most a key's limit say Held at once, fences rise in
// the order the holds began, and nothing is left held or queued at the
// end. Some sections outlive the ttl, held only through the client binding
// the lease again after each kill.
func TestWorkersThroughAStormOfKilledConnections(t *testing.T) {
	seconds := 5.0
	if v, err := strconv.ParseFloat(os.Getenv("PADLOCK_STORM_SECONDS"), 64); err == nil {
		seconds = v
	}
	const limit, ttl = 2, 500 * time.Millisecond
	capOf := func(key string) int {
		if key == "s" {
			return limit
		}
		return 1
	}
	onEachDriver(t, func(t *testing.T, s *server, p *Client) {
		r, ctx := s.raw(t), context.Background()
		killer := s.raw(t)
		mine := []string{fmt.Sprint(r.ClientID(ctx).Val()), fmt.Sprint(killer.ClientID(ctx).Val())}
		var mu sync.Mutex
		var problems []string
		problem := func(f string, a ...any) {
			mu.Lock()
			problems = append(problems, fmt.Sprintf(f, a...))
			mu.Unlock()
		}
		inside := map[string]map[int]bool{"a": {}, "b": {}, "s": {}}
		lastFence := map[string]int64{}
		var crowds []struct {
			key string
			ids []int
		}
		heldAtEnd := map[int]bool{}
		sections, kills := 0, 0
		end := time.Now().Add(time.Duration(seconds * float64(time.Second)))

		stop := make(chan struct{})
		go func() {
			defer close(stop)
			rng := rand.New(rand.NewSource(7))
			for time.Now().Before(end) {
				time.Sleep(time.Duration(20+rng.Intn(100)) * time.Millisecond)
				var ids []string
				for _, line := range strings.Split(killer.ClientList(ctx).Val(), "\n") {
					for _, f := range strings.Fields(line) {
						if id, ok := strings.CutPrefix(f, "id="); ok && id != mine[0] && id != mine[1] {
							ids = append(ids, id)
						}
					}
				}
				if len(ids) > 0 {
					killer.Do(ctx, "CLIENT", "KILL", "ID", ids[rng.Intn(len(ids))])
					kills++
				}
			}
		}()

		var wg sync.WaitGroup
		for n := range 6 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewSource(int64(100 + n)))
				for time.Now().Before(end) {
					key := []string{"a", "b", "s"}[rng.Intn(3)]
					var held context.Context
					var err error
					var heldNow func() bool
					var release func() error
					actx, cancel := context.WithTimeout(ctx, 10*time.Second)
					if key == "s" {
						sem := p.Semaphore(key, limit, TTL(ttl))
						held, err = sem.Acquire(actx)
						heldNow, release = func() bool { return sem.Held(held) }, func() error { return sem.Release(held) }
					} else {
						l := p.Lock(key, TTL(ttl))
						held, err = l.Acquire(actx)
						heldNow, release = func() bool { return l.Held(held) }, func() error { return l.Release(held) }
						if err == nil {
							fence, _ := l.Fence(held)
							mu.Lock()
							if fence <= lastFence[key] {
								problems = append(problems, fmt.Sprintf("%s: fence %d after %d", key, fence, lastFence[key]))
							}
							lastFence[key] = max(lastFence[key], fence)
							mu.Unlock()
						}
					}
					if err != nil {
						cancel()
						problem("acquire %s: %v", key, err)
						continue
					}
					if !heldNow() {
						problem("%s: Acquire answered a grant that Held denies (%v)", key, context.Cause(held))
					}
					mu.Lock()
					sections++
					at := sections
					inside[key][at] = true
					if len(inside[key]) > capOf(key) {
						ids := []int{}
						for id := range inside[key] {
							ids = append(ids, id)
						}
						crowds = append(crowds, struct {
							key string
							ids []int
						}{key, ids})
					}
					mu.Unlock()
					work := time.Duration(rng.Intn(4000)) * time.Microsecond
					if rng.Float64() < 0.1 {
						work = ttl * time.Duration(12+rng.Intn(6)) / 10
					}
					time.Sleep(work)
					still := heldNow()
					mu.Lock()
					delete(inside[key], at)
					heldAtEnd[at] = still
					mu.Unlock()
					if err := release(); err != nil && still {
						problem("release %s: %v", key, err)
					}
					cancel()
				}
			}()
		}
		wg.Wait()
		<-stop
		for _, c := range crowds {
			n := 0
			for _, id := range c.ids {
				if held, ok := heldAtEnd[id]; !ok || held {
					n++
				}
			}
			if n > capOf(c.key) {
				problems = append(problems, fmt.Sprintf("%s: %d said held at once", c.key, n))
			}
		}
		if len(problems) > 0 {
			t.Fatalf("%d problems, the first: %v", len(problems), problems[:min(10, len(problems))])
		}
		if kills < 10 || sections < 20 {
			t.Fatalf("kills %d, sections %d", kills, sections)
		}
		lost := 0
		for _, h := range heldAtEnd {
			if !h {
				lost++
			}
		}
		t.Logf("sections %d, lost %d, kills %d", sections, lost, kills)
		eventually(t, 5*time.Second, "nothing left held or queued", func() bool {
			return r.Exists(ctx, "a", "b", "s").Val() == 0 &&
				strings.Contains(r.Info(ctx, "padlock").Val(), "padlock_mailbox_waiters:0\r\n")
		})
	})
}
