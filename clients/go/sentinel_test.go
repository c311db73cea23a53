package padlock

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Sentinel group's failover client: padlock's connections go to the
// master Sentinel names.
func TestThroughSentinel(t *testing.T) {
	master := startServer(t)
	bin := os.Getenv("PADLOCK_SERVER")
	if bin == "" {
		bin = "redis-server"
	}
	port := freePort(t)
	conf := filepath.Join(t.TempDir(), "sentinel.conf")
	text := fmt.Sprintf("port %d\nbind 127.0.0.1\nsentinel monitor pad 127.0.0.1 %d 1\n", port, master.port)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, conf, "--sentinel")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr})
	defer sc.Close()
	eventually(t, 10*time.Second, "the sentinel knows the master", func() bool {
		got, err := sc.GetMasterAddrByName(context.Background(), "pad").Result()
		return err == nil && len(got) == 2 && got[1] == strconv.Itoa(master.port)
	})
	rdb := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "pad", SentinelAddrs: []string{addr}})
	defer rdb.Close()
	p, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	l := p.Lock("via-sentinel", TTL(time.Second))
	held, err := l.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := info(t, master.raw(t), "LOCK.INFO", "via-sentinel")["keep"]; got != int64(1) {
		t.Fatalf("keep %v on the master", got)
	}
	if err := l.Release(held); err != nil {
		t.Fatal(err)
	}
}
