package config

import (
	"io"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"testing"
)

func fuzzParser() Parser {
	return Parser{
		Open: func(string) (io.ReadCloser, error) { return nil, fs.ErrNotExist },
		Warn: func(Warning) {},
	}
}

// FuzzParse: the parser never panics, errors are *ParseError or name the file, and a parsed
// config rendered and re-parsed is equal to itself.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"testdata/agent.conf", "testdata/demo.conf", "testdata/include/base.conf"} {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Add("num_ps (1 + 2) * -3 / 4\nper_process_gpu_memory_fraction 1e-7\nreplica_id 0")
	f.Add("layout_filters none\nbzid a b # c\r\nx=\n=y\ninclude")
	f.Fuzz(func(t *testing.T, text string) {
		p := fuzzParser()
		c, err := p.Parse(strings.NewReader(text), "f.conf")
		if err != nil {
			if !strings.Contains(err.Error(), "f.conf") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		out, err := c.Render()
		if err != nil {
			return // a value the conf syntax cannot express verbatim
		}
		c2, err := p.Parse(strings.NewReader(out), "r.conf")
		if err != nil {
			t.Fatalf("re-parse of\n%s\nfailed: %v", out, err)
		}
		if !reflect.DeepEqual(c, c2) {
			t.Fatalf("round trip differs:\n%+v\n%+v\nrendered:\n%s", c, c2, out)
		}
	})
}

// FuzzResolve: resolution, the texts and the command lines never panic on a parsed config.
func FuzzResolve(f *testing.F) {
	f.Add("deploy_type ps\nnum_ps 3\nbase_path /b", "1", "2", "0")
	f.Add("stand_alone_serving true\ndense_alone true\nbase_path /b\nversion_policy all", "", "x", "1")
	f.Add("deploy_type dense\ndense_alone true\nbase_path hdfs:///b\nrough_sort_model_name r", "-1", "1", "3")
	f.Fuzz(func(t *testing.T, text, shardID, shardN, denseIdx string) {
		c, err := fuzzParser().Parse(strings.NewReader(text), "f.conf")
		if err != nil || c.NumPS > 1024 {
			return // large num_ps is valid but slow to render
		}
		env := MapEnv(map[string]string{"SHARD_ID": shardID, "MONOLITH_HOST_SHARD_N": shardN, "DENSE_SERVICE_IDX": denseIdx})
		r, err := c.Resolve(env, seqPorts())
		if err != nil {
			return
		}
		_, _ = r.PlatformConfigText()
		_ = r.WrapperCommand(TFSWrapperOptions{Binary: "tfs"})
		for _, st := range []string{"", ServerPS, ServerEntry, ServerDense} {
			_, _, _ = r.Command("tfs", st, "m.cfg")
			if ms, err := r.ModelServerConfig(st); err == nil {
				_ = ModelServerConfigText(ms)
			}
		}
	})
}

// FuzzEvalExpr: the arithmetic evaluator never panics and agrees with itself on integers.
func FuzzEvalExpr(f *testing.F) {
	for _, s := range []string{"60 * 1000 * 1000", "(1+2)*3", "-7/2", "1e400", "1.5e-3", ".5", "5.", "((((1))))"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if r, err := evalExpr(s); err == nil && r == nil {
			t.Fatal("nil result without error")
		}
		_, _ = evalInt(s)
		_, _ = evalFloat(s)
	})
}
