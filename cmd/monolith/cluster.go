package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"google.golang.org/protobuf/encoding/prototext"

	"github.com/monolith-go/monolith/internal/atomicfile"
	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/internal/zkserver"
	"github.com/monolith-go/monolith/pipelines/train"
)

// runCluster is `monolith cluster`, Monolith's LocalCluster on one machine: M `monolith
// ps` processes and N `monolith train` worker processes of this binary, found through
// static discovery (the shards' addresses) or ZooKeeper. The chief (worker 0) saves,
// evaluates and prints the summary; the cluster prints it with the examples and steps of
// every worker added up. SIGINT/SIGTERM stop every child within --stop-grace, the PS
// shards with a final save.
func runCluster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("cluster", stderr)
	cfgPath := fs.String("config", "", "training config, YAML or JSON (required)")
	data := fs.String("data", "", "a `DIR` written by monolith gen --planted; overrides the config's data and inputs")
	workers := fs.Int("workers", 2, "worker processes (index 0 is the chief)")
	numPS := fs.Int("ps", 2, "PS shard processes")
	ckpt := fs.String("checkpoint-dir", "", "model directory (overrides checkpoint.dir): the shards' checkpoints and the chief's state and event file")
	logDir := fs.String("log-dir", "", "folder of the children's logs, the tables file and the shards' address files (default: <model dir>/cluster)")
	disc := fs.String("discovery", "static", "how the workers find the shards: static (the addresses the shards report) or zk")
	zk := fs.String("zk", "", "ZooKeeper servers of --discovery zk (default: start one from the Debian zookeeper package)")
	job := fs.String("job", "monolith", "the job's name (ZooKeeper folder /monolith/NAME)")
	grace := fs.Duration("stop-grace", 10*time.Second, "how long children get to stop after SIGTERM before SIGKILL")
	startWait := fs.Duration("start-wait", 60*time.Second, "how long a PS shard gets to start listening")
	tlsc := tlsconf.AddFlags(fs) // given to every child
	psRestarts := fs.Int("ps-restarts", 3, "with --discovery zk, how many times a PS shard that dies is restarted (on a new port; it restores its last checkpoint and registers its new address, and the workers wait for it); 0 ends the run instead")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: monolith cluster --config FILE [flags] [-- worker flags]\n\n"+
			"Runs a training job as N worker processes and M PS processes on this machine\n"+
			"(Monolith's LocalCluster). Each worker runs threads/N goroutines per step, so the\n"+
			"job uses the cores one `monolith train` would, and each child's GOMAXPROCS is its\n"+
			"share: threads/N for a worker (at least 2), cores/M for a shard, unless GOMAXPROCS\n"+
			"is set. Flags after -- go to every `monolith train` worker.")
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	extra := fs.Args()
	switch {
	case *cfgPath == "":
		return fmt.Errorf("%w: cluster needs --config FILE", errUsage)
	case *workers < 1 || *numPS < 1 || *psRestarts < 0:
		return fmt.Errorf("%w: --workers %d and --ps %d must be ≥ 1, --ps-restarts %d ≥ 0", errUsage, *workers, *numPS, *psRestarts)
	case *disc != "static" && *disc != "zk":
		return fmt.Errorf("%w: --discovery %q: cluster runs static or zk", errUsage, *disc)
	}
	c, err := train.LoadConfig(*cfgPath)
	if err != nil {
		return err
	}
	if *data != "" {
		c.SetData(*data)
	}
	if *ckpt != "" {
		c.Checkpoint.Dir = *ckpt
	}
	c.PS.Shards, c.Runner.NumPS = *numPS, 0
	if err := c.Normalize(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if c.Discovery() != "" {
		return fmt.Errorf("%w: %s: cluster starts its own PS shards; drop ps.addrs and runner.discovery_type", errUsage, *cfgPath)
	}
	pr, err := train.Prepare(c)
	if err != nil {
		return err
	}
	dir := *logDir
	if dir == "" {
		if c.Checkpoint.Dir == "" {
			return fmt.Errorf("%w: cluster needs a model directory (checkpoint.dir or --checkpoint-dir) or --log-dir", errUsage)
		}
		dir = filepath.Join(c.Checkpoint.Dir, "cluster")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cluster: log dir: %w", err)
	}
	tables, err := prototext.MarshalOptions{Multiline: true}.Marshal(pr.Tables)
	if err != nil {
		return err
	}
	tablesFile := filepath.Join(dir, "tables.pbtxt")
	if err := atomicfile.WriteFile(tablesFile, tables); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cluster: this binary: %w", err)
	}
	if *disc == "zk" && *zk == "" {
		// Our own ZooKeeper, stopped with the cluster.
		zs, err := zkserver.Start(ctx, zkserver.Options{Dir: filepath.Join(dir, "zookeeper")})
		if err != nil {
			return fmt.Errorf("cluster: --discovery zk without --zk: %w", err)
		}
		defer zs.Stop()
		*zk = zs.Addr()
		fmt.Fprintf(stderr, "cluster: ZooKeeper at %s\n", *zk)
	}
	cl := &cluster{exe: exe, dir: dir, grace: *grace, stderr: stderr, exited: make(chan *child, *numPS*(1+*psRestarts)+*workers)}
	defer cl.stopAll()

	// The shards, each writing its address once it listens (and has registered).
	if err := tlsc.Validate(); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if tlsc.Enabled() && tlsc.Cert == "" {
		return fmt.Errorf("%w: the cluster's shards and chief serve: TLS needs --tls-cert and --tls-key", errUsage)
	}
	discArgs := append([]string{"--discovery", *disc}, tlsc.Args()...)
	if *disc == "zk" {
		discArgs = append(discArgs, "--zk", *zk, "--job", *job)
	}
	// Each shard's share of the cores is its GOMAXPROCS (childEnv); the workers' is set
	// below.
	psProcs := max(1, runtime.GOMAXPROCS(0) / *numPS)
	addrs := make([]string, *numPS)
	psArgs := make([][]string, *numPS)
	shards := make([]*child, *numPS)
	for i := range *numPS {
		args := []string{"ps", "--shard", strconv.Itoa(i), "--num-shards", strconv.Itoa(*numPS), "--tables", tablesFile,
			"--listen", "127.0.0.1:0", "--addr-file", cl.addrFile(i),
			"--seed", strconv.FormatUint(c.PS.Seed, 10), "--keep-checkpoints", strconv.Itoa(c.Checkpoint.Keep)}
		if c.Checkpoint.Dir != "" {
			args = append(args, "--checkpoint-dir", c.Checkpoint.Dir)
		}
		psArgs[i] = append(args, discArgs...)
		_ = os.Remove(cl.addrFile(i)) // an earlier run's
		if shards[i], err = cl.start(fmt.Sprintf("ps-%d", i), psArgs[i], nil, psProcs); err != nil {
			return err
		}
	}
	for i := range *numPS {
		if addrs[i], err = cl.waitAddr(ctx, shards[i], i, *startWait); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "cluster: %d PS shards at %s; logs in %s\n", *numPS, strings.Join(addrs, ","), dir)

	// The workers share this machine's cores: each runs threads / N goroutines per step
	// (at least one), unless the flags after -- say otherwise.
	threads := c.Threads
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	threads = max(1, threads / *workers)
	// A worker's GOMAXPROCS: its threads, and never fewer than 2. With one, prism's
	// progress loop, which spins on an already-closed channel from the end of a bundle's
	// data to its response (v2.77.0), holds the only P until preempted and delays the
	// response it waits for: a 2 048-example cluster run took 0.55 CPU-s instead of 0.28.
	workerProcs := max(2, threads)
	var chiefOut bytes.Buffer
	outs := make([]*bytes.Buffer, *workers)
	for i := range *workers {
		args := []string{"train", "--config", *cfgPath, "--index", strconv.Itoa(i), "--num_workers", strconv.Itoa(*workers),
			"--shards", strconv.Itoa(*numPS), "--progress", "always", "--threads", strconv.Itoa(threads)}
		if *data != "" {
			args = append(args, "--data", *data)
		}
		if *ckpt != "" {
			args = append(args, "--checkpoint-dir", *ckpt)
		}
		if *disc == "static" {
			args = append(args, "--ps", strings.Join(addrs, ","))
			args = append(args, tlsc.Args()...)
		} else {
			args = append(args, discArgs...)
		}
		args = append(args, extra...)
		outs[i] = &bytes.Buffer{}
		if i == 0 {
			outs[i] = &chiefOut
		}
		if _, err := cl.start(fmt.Sprintf("worker-%d", i), args, outs[i], workerProcs); err != nil {
			return err
		}
	}
	// Wait for the workers. A worker that fails stops the cluster; so does a shard that
	// dies, unless discovery can tell the workers where its restart listens.
	left := *workers
	restarts := make([]int, *numPS)
	for left > 0 {
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "cluster: %v: stopping every child (grace %v)\n", context.Cause(ctx), *grace)
			cl.stopAll()
			return ctx.Err()
		case ch := <-cl.exited:
			i := slices.Index(shards, ch)
			if i >= 0 && *disc == "zk" && restarts[i] < *psRestarts {
				restarts[i]++
				fmt.Fprintf(stderr, "cluster: %s exited (%v) while training ran: restarting it on a new port (restart %d of %d); it restores its last checkpoint, and the workers wait for its new address in ZooKeeper\n",
					ch.name, ch.err, restarts[i], *psRestarts)
				cl.forget(ch)
				old, _ := os.ReadFile(cl.addrFile(i))
				_ = os.Remove(cl.addrFile(i))
				// Another port than the dead one's: the kernel would often hand the same
				// one out again, and a client must not mistake the new shard for the old.
				listen, err := loopbackPortExcept(strings.TrimSpace(string(old)))
				if err != nil {
					return fmt.Errorf("cluster: restart %s: %w", ch.name, err)
				}
				args := slices.Clone(psArgs[i])
				args[slices.Index(args, "--listen")+1] = listen
				if shards[i], err = cl.start(ch.name, args, nil, psProcs); err != nil {
					return err
				}
				continue
			}
			if ch.err != nil || i >= 0 {
				hint := ""
				if i >= 0 && *disc == "static" {
					hint = " (with --discovery zk the cluster restarts a shard that dies)"
				}
				return fmt.Errorf("cluster: %s exited (%v) while training ran%s; its log %s ends:\n%s", ch.name, ch.err, hint, ch.log, tail(ch.log, 20))
			}
			left--
		}
	}
	// Stop the shards (each saves on SIGTERM), then report.
	if err := cl.stopAll(); err != nil {
		return err
	}
	sum, err := mergeSummaries(outs)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(sum) // one JSON line, as the other commands print
}

// cluster supervises the children of `monolith cluster`.
type cluster struct {
	exe      string
	dir      string
	grace    time.Duration
	stderr   io.Writer
	children []*child // running or stopped ones; a restarted child's predecessor is forgotten
	started  []string // the names ever started
	exited   chan *child
	stopped  bool
}

// childEnv is the environment of a child process given its share of the cores: env with
// GOMAXPROCS=procs, unless env sets GOMAXPROCS to a value already (the user's choice
// stands; an empty one means unset to the Go runtime, and here too). The
// processes of a local cluster share one machine; each Go runtime would otherwise run as
// many threads as the machine has cores and spin them looking for work, which cost the
// suite's 2-core cluster a sixth of its CPU (benchmarks/NOTES.md, issue 22).
func childEnv(env []string, procs int) []string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "GOMAXPROCS="); ok && v != "" {
			return env
		}
	}
	return append(slices.Clip(env), "GOMAXPROCS="+strconv.Itoa(max(1, procs)))
}

// child is one process of the cluster.
type child struct {
	name string
	log  string
	cmd  *exec.Cmd
	done chan struct{} // closed once reaped; err is set then
	err  error
}

// start runs this binary with args; its stderr (and stdout unless out is given) goes to
// <dir>/<name>.log. procs is the child's share of this machine's cores, its GOMAXPROCS
// (childEnv).
func (cl *cluster) start(name string, args []string, out io.Writer, procs int) (*child, error) {
	logPath := filepath.Join(cl.dir, name+".log")
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if slices.Contains(cl.started, name) { // a restart: its log goes on
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	f, err := os.OpenFile(logPath, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cluster: %s: %w", name, err)
	}
	ch := &child{name: name, log: logPath, done: make(chan struct{})}
	ch.cmd = exec.Command(cl.exe, args...)
	ch.cmd.Env = childEnv(os.Environ(), procs)
	ch.cmd.Stdout, ch.cmd.Stderr = f, f
	if name == "worker-0" { // the chief's progress shows on the cluster's stderr too
		ch.cmd.Stderr = io.MultiWriter(f, cl.stderr)
	}
	if out != nil {
		ch.cmd.Stdout = out
	}
	// A process group of its own: a terminal's Ctrl-C reaches the cluster, which stops the
	// workers before the shards.
	ch.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	ch.cmd.WaitDelay = cl.grace
	if err := ch.cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("cluster: start %s: %w", name, err)
	}
	cl.children = append(cl.children, ch)
	cl.started = append(cl.started, name)
	go func() {
		ch.err = ch.cmd.Wait()
		f.Close()
		close(ch.done)
		cl.exited <- ch
	}()
	return ch, nil
}

// loopbackPortExcept returns a 127.0.0.1 address whose port was free a moment ago and is
// not old's.
func loopbackPortExcept(old string) (string, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := l.Addr().String()
		l.Close()
		if addr != old {
			return addr, nil
		}
	}
	return "", fmt.Errorf("no free loopback port other than %s", old)
}

// forget drops a dead child that a restart replaces, so stopAll neither waits for it nor
// reports its death.
func (cl *cluster) forget(ch *child) {
	cl.children = slices.DeleteFunc(cl.children, func(c *child) bool { return c == ch })
}

// addrFile is where shard i writes its address once it listens.
func (cl *cluster) addrFile(i int) string { return filepath.Join(cl.dir, fmt.Sprintf("ps-%d.addr", i)) }

// waitAddr waits for shard i's (child ch's) address file.
func (cl *cluster) waitAddr(ctx context.Context, ch *child, i int, wait time.Duration) (string, error) {
	path := cl.addrFile(i)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(b)) > 0 {
			return string(bytes.TrimSpace(b)), nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-ch.done:
			return "", fmt.Errorf("cluster: %s exited (%v) before it listened; its log %s ends:\n%s", ch.name, ch.err, ch.log, tail(ch.log, 20))
		case <-deadline.C:
			return "", fmt.Errorf("cluster: %s did not report its address in %v; its log %s ends:\n%s", ch.name, wait, ch.log, tail(ch.log, 20))
		case <-tick.C:
		}
	}
}

// stopAll sends SIGTERM to every running child (the shards save as they stop) and SIGKILL
// to any still running after the grace period, so the whole stop takes at most that. It
// returns the failures of the shards' stops. Calling it again does nothing.
func (cl *cluster) stopAll() error {
	if cl.stopped {
		return nil
	}
	cl.stopped = true
	for _, ch := range cl.children {
		_ = syscall.Kill(-ch.cmd.Process.Pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(cl.grace)
	var errs []error
	for _, ch := range cl.children {
		timer := time.NewTimer(time.Until(deadline))
		select {
		case <-ch.done:
		case <-timer.C:
			fmt.Fprintf(cl.stderr, "cluster: %s did not stop within %v: killing it\n", ch.name, cl.grace)
			_ = syscall.Kill(-ch.cmd.Process.Pid, syscall.SIGKILL)
			<-ch.done
		}
		timer.Stop()
		if strings.HasPrefix(ch.name, "ps-") && ch.err != nil {
			errs = append(errs, fmt.Errorf("cluster: %s stopped with %v; its log %s ends:\n%s", ch.name, ch.err, ch.log, tail(ch.log, 20)))
		}
	}
	return errors.Join(errs...)
}

// mergeSummaries is the chief's summary with every worker's examples and steps added up.
func mergeSummaries(outs []*bytes.Buffer) (*train.Summary, error) {
	var chief *train.Summary
	var examples, steps int64
	for i, o := range outs {
		var s train.Summary
		line := bytes.TrimSpace(o.Bytes())
		if k := bytes.LastIndexByte(line, '\n'); k >= 0 {
			line = line[k+1:]
		}
		if err := json.Unmarshal(line, &s); err != nil {
			return nil, fmt.Errorf("cluster: worker-%d printed no summary (%q): %w", i, line, err)
		}
		examples += s.Examples
		steps += s.Steps
		if i == 0 {
			chief = &s
		}
	}
	chief.Examples, chief.Steps = examples, steps
	if chief.TrainSeconds > 0 {
		chief.ExamplesPerSec = float64(examples) / chief.TrainSeconds
	}
	return chief, nil
}

// tail returns the last n lines of a file ("" when unreadable).
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
