package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"

	"github.com/monolith-go/monolith/internal/pytext"
	"github.com/monolith-go/monolith/internal/tlsconf"
	"github.com/monolith-go/monolith/internal/zk"
	"github.com/monolith-go/monolith/ps/discovery"
	pb "github.com/monolith-go/monolith/schemas/agentpb"
	"github.com/monolith-go/monolith/schemas/tfcorepb"
	tfspb "github.com/monolith-go/monolith/schemas/tfservingpb"
	"github.com/monolith-go/monolith/serving/config"
	"github.com/monolith-go/monolith/serving/datadef"
	"github.com/monolith-go/monolith/serving/tfs"
)

// runAgentClient is `monolith agent-client`, the reference's agent_client (§1.15) with its
// output formats: hb and gr call the agent's AgentService; addr, get, load, unload and
// clean read or write the bzid's ZooKeeper nodes, each in its own session. The agent is
// dialled at --host (127.0.0.1, where `monolith agent` binds by default; the reference used
// MY_HOST_IP or the hostname's address).
func runAgentClient(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("agent-client", stderr)
	tlsc := tlsconf.AddFlags(fs) // hb, gr and predict: the AgentService's (predict: and the replicas')
	conf := fs.String("conf", "", "agent conf file (required)")
	port := fs.Int("port", 0, "agent port (0: the conf's agent_port)")
	host := fs.String("host", "127.0.0.1", "agent host")
	cmdType := fs.String("cmd_type", "hb", "hb|gr|addr|get|load|unload|clean|predict")
	argsFlag := fs.String("args", "addr", "for get and clean: addr|portal|pub|res|lock|elect|info")
	serverType := fs.String("server_type", "ps", "ps|entry|dense")
	task := fs.Int("task", 0, "task id of the server type (gr)")
	modelName := fs.String("model_name", "", "model name when the conf has no base_name")
	modelDir := fs.String("model_dir", "", "saved model dir (load)")
	ckpt := fs.String("ckpt", "", "checkpoint name (load)")
	numShard := fs.Int("num_shard", -1, "number of shards the model uses (load)")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on the whole command")
	inputType, inputFile, batchSize := predictFlags(fs, "predict")
	signature := fs.String("signature_name", "serving_default", "predict: the signature")
	verbose := fs.Bool("v", false, "verbose logging")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 0 || *conf == "" {
		return fmt.Errorf("%w: agent-client needs --conf and takes no arguments", errUsage)
	}
	st, ok := pb.ServerType_value[strings.ToUpper(*serverType)]
	if !ok {
		return fmt.Errorf("%w: --server_type %q is not ps, entry or dense", errUsage, *serverType)
	}
	switch *argsFlag {
	case "addr", "portal", "pub", "res", "lock", "elect", "info":
	default:
		return fmt.Errorf("%w: --args %q is not addr, portal, pub, res, lock, elect or info", errUsage, *argsFlag)
	}
	log := loggerAt(stderr, *verbose, slog.LevelWarn)
	cfg, err := config.Parser{Warn: func(w config.Warning) { log.Warn("conf", "warning", w.String()) }}.Load(*conf)
	if err != nil {
		return err
	}
	if cfg, err = cfg.Resolve(config.OSEnv(), config.FreePort); err != nil {
		return err
	}
	if *port != 0 {
		cfg.AgentPort = *port
	}
	model := cfg.BaseName
	if model == "" {
		model = *modelName
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	c := &agentClient{cfg: cfg, model: model, out: stdout, log: log}

	switch *cmdType {
	case "hb", "gr", "predict":
		ct, err := tlsClient(tlsc)
		if err != nil {
			return err
		}
		cc, err := grpc.NewClient(net.JoinHostPort(*host, strconv.Itoa(cfg.AgentPort)), tlsconf.DialOption(ct))
		if err != nil {
			return err
		}
		defer cc.Close()
		stub := pb.NewAgentServiceClient(cc)
		switch *cmdType {
		case "hb":
			return c.heartBeat(ctx, stub, pb.ServerType(st))
		case "predict":
			if model == "" {
				return fmt.Errorf("%w: predict needs the served model's name (conf base_name or --model_name, e.g. model:sub_graph)", errUsage)
			}
			alias, in, err := predictInput(ctx, *inputType, *inputFile, *batchSize)
			if err != nil {
				return err
			}
			return c.predict(ctx, stub, pb.ServerType(st), ct, &tfspb.ModelSpec{Name: model, SignatureName: *signature}, map[string]*tfcorepb.TensorProto{alias: in})
		}
		if model == "" {
			return fmt.Errorf("%w: gr needs a model name (conf base_name or --model_name)", errUsage)
		}
		return c.getReplicas(ctx, stub, pb.ServerType(st), *task)
	case "get":
		if *argsFlag == "info" {
			return errors.New("not implemented: agent-client get info (cal_model_info_v2 reads TensorFlow checkpoints)")
		}
		if *argsFlag == "addr" {
			return c.withZK(ctx, c.addr)
		}
		return c.withZK(ctx, func(ctx context.Context, z *zk.Client) error { return c.list(ctx, z, *argsFlag) })
	case "addr":
		return c.withZK(ctx, c.addr)
	case "load":
		if model == "" {
			return fmt.Errorf("%w: load needs a model name (conf base_name or --model_name)", errUsage)
		}
		mm := datadef.NewModelMeta()
		mm.ModelName = datadef.Some(model)
		if *modelDir != "" {
			mm.ModelDir = datadef.Some(*modelDir)
		}
		if *ckpt != "" {
			mm.Ckpt = datadef.Some(*ckpt)
		}
		mm.NumShard = int64(*numShard)
		return c.withZK(ctx, func(ctx context.Context, z *zk.Client) error {
			return z.CreateOrSet(ctx, datadef.PortalBasePath(cfg.BZID)+"/"+model, mm.Serialize())
		})
	case "unload":
		return c.withZK(ctx, func(ctx context.Context, z *zk.Client) error {
			if err := z.Delete(ctx, datadef.PortalBasePath(cfg.BZID)+"/"+model, false); err != nil {
				log.Info("unload", "err", err) // ignored, as in the reference
			}
			return nil
		})
	case "clean":
		return c.withZK(ctx, func(ctx context.Context, z *zk.Client) error { return c.clean(ctx, z, *argsFlag) })
	}
	return fmt.Errorf("%w: --cmd_type %q is not hb, gr, addr, get, load, unload, clean or predict", errUsage, *cmdType)
}

type agentClient struct {
	cfg   config.AgentConfig
	model string
	out   io.Writer
	log   *slog.Logger
}

// heartBeat prints "{key}  -> ({n}) \n\t{lines}" per key, lines being the text format of
// the AddressList (Python prints one empty line for an empty list, counted as 1). Keys come
// sorted (Python: map order).
func (c *agentClient) heartBeat(ctx context.Context, stub pb.AgentServiceClient, st pb.ServerType) error {
	resp, err := stub.HeartBeat(ctx, &pb.HeartBeatRequest{ServerType: st})
	if err != nil {
		return fmt.Errorf("HeartBeat: %w", err)
	}
	keys := make([]string, 0, len(resp.GetAddresses()))
	for k := range resp.GetAddresses() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		lines := addressListLines(resp.GetAddresses()[k])
		fmt.Fprintf(c.out, "%s  -> (%d) \n\t%s\n", k, len(lines), strings.Join(lines, "\n\t"))
	}
	return nil
}

// predict asks the agent (HeartBeat) where spec's model is served, sends the inputs to
// its replicas in the order the agent lists them until one answers (a replica that does
// not answer is logged and skipped), and prints the response in protobuf text.
func (c *agentClient) predict(ctx context.Context, stub pb.AgentServiceClient, st pb.ServerType, ct *tls.Config,
	spec *tfspb.ModelSpec, inputs map[string]*tfcorepb.TensorProto) error {
	resp, err := stub.HeartBeat(ctx, &pb.HeartBeatRequest{ServerType: st})
	if err != nil {
		return fmt.Errorf("HeartBeat: %w", err)
	}
	addrs := resp.GetAddresses()[spec.GetName()].GetAddress()
	if len(addrs) == 0 {
		keys := slices.Sorted(maps.Keys(resp.GetAddresses()))
		return fmt.Errorf("the agent serves no replica of %q (it lists %v)", spec.GetName(), keys)
	}
	var errs []error
	for _, a := range addrs {
		out, err := predictAt(ctx, a, ct, spec, inputs)
		if err == nil {
			return printText(c.out, out)
		}
		c.log.Warn("replica did not answer", "model", spec.GetName(), "addr", a, "err", err)
		errs = append(errs, fmt.Errorf("%s: %w", a, err))
	}
	return fmt.Errorf("predict %s: no replica answered: %w", spec.GetName(), errors.Join(errs...))
}

// predictAt sends one Predict to the TF Serving at addr.
func predictAt(ctx context.Context, addr string, ct *tls.Config, spec *tfspb.ModelSpec, inputs map[string]*tfcorepb.TensorProto) (*tfspb.PredictResponse, error) {
	mon, err := tfs.DialMonitor(addr, tlsconf.DialOption(ct))
	if err != nil {
		return nil, err
	}
	defer mon.Close()
	return mon.Predict(ctx, spec, inputs)
}

// addressListLines is Python's str(AddressList).strip().split("\n").
func addressListLines(l *pb.AddressList) []string {
	var lines []string
	for _, a := range l.GetAddress() {
		lines = append(lines, `address: "`+pytext.CEscape(a)+`"`)
	}
	if len(lines) == 0 {
		return []string{""}
	}
	return lines
}

// getReplicas prints "PS 0  =>  ['a', 'b']".
func (c *agentClient) getReplicas(ctx context.Context, stub pb.AgentServiceClient, st pb.ServerType, task int) error {
	resp, err := stub.GetReplicas(ctx, &pb.GetReplicasRequest{ServerType: st, Task: int32(task), ModelName: c.model})
	if err != nil {
		return fmt.Errorf("GetReplicas: %w", err)
	}
	items := make([]string, len(resp.GetAddressList().GetAddress()))
	for i, a := range resp.GetAddressList().GetAddress() {
		items[i] = pytext.Repr(a)
	}
	fmt.Fprintf(c.out, "%s %d  =>  [%s]\n", pb.ServerType_name[int32(st)], task, strings.Join(items, ", "))
	return nil
}

func (c *agentClient) withZK(ctx context.Context, fn func(context.Context, *zk.Client) error) error {
	servers, err := discovery.ParseServers(c.cfg.ZKServers)
	if err != nil {
		return fmt.Errorf("conf zk_servers: %w", err)
	}
	if len(servers) == 0 {
		return errors.New("the conf has no zk_servers")
	}
	z, err := zk.Connect(ctx, zk.Options{Servers: servers, Auth: os.Getenv("ZK_AUTH"), Logger: c.log})
	if err != nil {
		return err
	}
	defer z.Close()
	return fn(ctx, z)
}

var taskName = regexp.MustCompile(`^\w+:\d+$`)

// addr prints every replica under /{bzid}/service/{model} (through idc:cluster levels).
func (c *agentClient) addr(ctx context.Context, z *zk.Client) error {
	if c.model == "" {
		return fmt.Errorf("%w: addr needs a model name (conf base_name or --model_name)", errUsage)
	}
	prefix := datadef.ServiceBasePath(c.cfg.BZID) + "/" + c.model
	kids, err := z.Children(ctx, prefix)
	if errors.Is(err, zk.ErrNoNode) {
		fmt.Fprintf(c.out, "%s has not load !\n", c.model)
		return nil
	}
	if err != nil {
		return err
	}
	var servers []string
	for _, k := range kids {
		if taskName.MatchString(k) {
			servers = append(servers, k)
			continue
		}
		svrs, err := z.Children(ctx, prefix+"/"+k)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		for _, s := range svrs {
			servers = append(servers, k+"/"+s)
		}
	}
	var lines []string
	for _, s := range servers {
		reps, err := z.Children(ctx, prefix+"/"+s)
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
		for _, r := range reps {
			p := prefix + "/" + s + "/" + r
			data, _, err := z.Get(ctx, p)
			if errors.Is(err, zk.ErrNoNode) {
				continue // gone while listing
			}
			if err != nil {
				return err
			}
			rm, err := datadef.DeserializeReplicaMeta(data)
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			lines = append(lines, fmt.Sprintf("%s\tarchon_address: %s\taddress: %s\tstate: %s",
				p, pyNull(rm.ArchonAddress), pyNull(rm.Address), tfspb.ModelVersionStatus_State(rm.Stat)))
		}
	}
	sort.Strings(lines)
	fmt.Fprintln(c.out, strings.Join(lines, "\n"))
	return nil
}

func pyNull(n datadef.Null[string]) string {
	if v, ok := n.Get(); ok {
		return v
	}
	return "None"
}

// listBase maps get/clean --args to their folder under /{bzid}.
var listBase = map[string]string{"res": "resource", "pub": "publish", "portal": "portal", "lock": "lock", "elect": "election", "addr": "service"}

// list prints "key b'value'" for every child of the folder, sorted by key, "{}" when empty
// and "no {args} found !" when the folder is missing.
func (c *agentClient) list(ctx context.Context, z *zk.Client, what string) error {
	base := "/" + c.cfg.BZID + "/" + listBase[what]
	kids, err := z.Children(ctx, base)
	if errors.Is(err, zk.ErrNoNode) {
		fmt.Fprintf(c.out, "no %s found !\n", what)
		return nil
	}
	if err != nil {
		return err
	}
	if len(kids) == 0 {
		fmt.Fprintln(c.out, "{}")
		return nil
	}
	sort.Strings(kids)
	for _, k := range kids {
		data, _, err := z.Get(ctx, base+"/"+k)
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(c.out, "%s %s\n", k, pytext.BytesRepr(data))
	}
	return nil
}

// clean deletes every child of portal, publish, service (recursively) or resource.
func (c *agentClient) clean(ctx context.Context, z *zk.Client, what string) error {
	if what != "portal" && what != "pub" && what != "addr" && what != "res" {
		return fmt.Errorf("%s is not supported (clean takes portal, pub, addr or res)", what)
	}
	base := "/" + c.cfg.BZID + "/" + listBase[what]
	kids, err := z.Children(ctx, base)
	if err != nil {
		return err
	}
	for _, k := range kids {
		if err := z.Delete(ctx, base+"/"+k, what == "addr" || what == "res"); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return err
		}
	}
	return nil
}
