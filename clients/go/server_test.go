package padlock

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/valkey-io/valkey-go"
)

// A real server with the module, on a free loopback port, stopped at the
// test's end: PADLOCK_SO is the module, PADLOCK_SERVER the server binary
// (redis-server on the PATH by default), as in the project's other suites.

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// The servers of a test stop before its clients: go-redis need not say so.
func init() { redis.SetLogger(quiet{}) }

type server struct {
	port int
	cmd  *exec.Cmd
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func startServer(t testing.TB, extra ...string) *server {
	t.Helper()
	bin := os.Getenv("PADLOCK_SERVER")
	if bin == "" {
		bin = "redis-server"
	}
	return startServerOf(t, bin, extra...)
}

// startServerOf is startServer with the server binary named.
func startServerOf(t testing.TB, bin string, extra ...string) *server {
	t.Helper()
	so := os.Getenv("PADLOCK_SO")
	if so == "" {
		t.Fatal("PADLOCK_SO must name the built module (make test sets it)")
	}
	for range 5 {
		port := freePort(t)
		args := append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", t.TempDir(), "--loadmodule", so}, extra...)
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = nil, nil
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		s := &server{port: port, cmd: cmd}
		if s.waitUp() {
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			return s
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	t.Fatal("no server came up")
	return nil
}

func (s *server) waitUp() bool {
	c := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1})
	defer c.Close()
	for range 200 {
		if c.Ping(context.Background()).Err() == nil {
			return true
		}
		time.Sleep(25 * time.Millisecond)
	}
	return false
}

func (s *server) addr() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// raw is a plain go-redis client of the test's own.
func (s *server) raw(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: s.addr(), Protocol: 2})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// drivers are the Clients a test runs on, each on a server of its own.
var drivers = []string{"go-redis", "valkey-go"}

func onEachDriver(t *testing.T, test func(t *testing.T, s *server, p *Client)) {
	for _, d := range drivers {
		t.Run(d, func(t *testing.T) {
			s := startServer(t)
			test(t, s, s.client(t, d))
		})
	}
}

func (s *server) client(t testing.TB, driver string) *Client {
	if driver == "go-redis" {
		return clientOn(t, s.addr())
	}
	vc, err := valkey.NewClient(valkey.ClientOption{InitAddress: []string{s.addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewValkey(vc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(); vc.Close() })
	return p
}

func clientOn(t testing.TB, addr string) *Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	p, err := New(rdb)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(); _ = rdb.Close() })
	return p
}

// info is *.INFO of key as a map.
func info(t testing.TB, r *redis.Client, cmd, key string) map[string]any {
	t.Helper()
	v, err := r.Do(context.Background(), cmd, key).Result()
	if err == redis.Nil {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	list, _ := v.([]any)
	out := map[string]any{}
	for i := 0; i+1 < len(list); i += 2 {
		out[fmt.Sprint(list[i])] = list[i+1]
	}
	return out
}

func eventually(t testing.TB, within time.Duration, what string, ok func() bool) {
	t.Helper()
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		if ok() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("not within %v: %s", within, what)
}

// ---- the project's reply-dropping proxy (scripts/faultproxy.py) ---------------

type faultProxy struct {
	port int
	cmd  *exec.Cmd
	in   *bufio.Writer
	out  *bufio.Scanner
}

func startProxy(t testing.TB, target int) *faultProxy {
	_, file, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(file), "..", "..", "scripts", "faultproxy.py")
	cmd := exec.Command("python3", script, strconv.Itoa(target))
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{cmd: cmd, in: bufio.NewWriter(stdin), out: bufio.NewScanner(stdout)}
	if !p.out.Scan() {
		t.Fatal("the proxy did not start")
	}
	p.port, _ = strconv.Atoi(strings.TrimSpace(p.out.Text()))
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return p
}

func (p *faultProxy) ask(line string) string {
	_, _ = p.in.WriteString(line + "\n")
	_ = p.in.Flush()
	p.out.Scan()
	return p.out.Text()
}

// drop loses the reply to the next command (and all after it on that
// connection, which is then closed).
func (p *faultProxy) drop(command string) { p.ask("drop " + command) }

// blackhole makes every connection go silent, sockets left open.
func (p *faultProxy) blackhole() { p.ask("blackhole") }

func (p *faultProxy) dropped() int {
	n, _ := strconv.Atoi(strings.Fields(p.ask("count"))[1])
	return n
}
