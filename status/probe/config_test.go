package probe

import (
	"strings"
	"testing"
)

func TestParseValid(t *testing.T) {
	doc := `{
	 "/app-health/web/livez": {"httpGet": {"path": "healthz", "port": 8080, "scheme": "HTTPS",
	   "httpHeaders": [{"name": "X-A", "value": "1"}]}, "timeoutSeconds": 3},
	 "/app-health/web/readyz": {"tcpSocket": {"port": 9090}},
	 "/app-health/rpc/startupz": {"grpc": {"port": 7070, "service": "svc"}},
	 "/app-lifecycle/web/prestopz": {"httpGet": {"path": "/stop", "port": 8080}}
	}`
	got, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("got %d actions, want 4", len(got))
	}
	l := got["/app-health/web/livez"]
	if l.Container != "web" || l.HTTP == nil || l.HTTP.Path != "/healthz" || l.HTTP.Port != 8080 || !l.HTTP.HTTPS ||
		l.TimeoutSeconds != 3 || len(l.HTTP.Headers) != 1 || l.HTTP.Headers[0] != (Header{"X-A", "1"}) {
		t.Errorf("livez parsed as %+v / %+v", l, l.HTTP)
	}
	if r := got["/app-health/web/readyz"]; r.TCP == nil || r.TCP.Port != 9090 {
		t.Errorf("readyz parsed as %+v", r)
	}
	if s := got["/app-health/rpc/startupz"]; s.GRPC == nil || s.GRPC.Port != 7070 || s.GRPC.Service != "svc" || s.Container != "rpc" {
		t.Errorf("startupz parsed as %+v", s)
	}
	if empty, err := Parse([]byte("  ")); err != nil || len(empty) != 0 {
		t.Errorf("empty doc: %v %v", empty, err)
	}
}

func TestParseErrorsNameContainer(t *testing.T) {
	cases := []struct{ doc, want string }{
		{`{"/app-health/web/livez": {"httpGet": {"port": "http"}}}`, `container "web"`},
		{`{"/app-health/web/livez": {"httpGet": {"port": 8080}, "tcpSocket": {"port": 1}}}`, `container "web"`},
		{`{"/app-health/db/readyz": {}}`, `container "db"`},
		{`{"/app-health/db/readyz": null}`, `container "db"`},
		{`{"/app-health/db/readyz": {"tcpSocket": {"port": 70000}}}`, `container "db"`},
		{`{"/app-health/db/readyz": {"tcpSocket": {}}}`, `tcpSocket.port: missing`},
		{`{"/app-health/api/readyz": {"grpc": {"port": 1.5}}}`, `container "api"`},
		{`{"/app-health/api/readyz": {"httpGet": {"port": 1, "scheme": "FTP"}}}`, `"FTP"`},
		{`{"/app-health/api/readyz": {"httpGet": {"port": 1}, "timeoutSeconds": -1}}`, `container "api"`},
		{`{"/app-health/api/nope": {"httpGet": {"port": 1}}}`, `path "/app-health/api/nope"`},
		{`{"/healthz/api/readyz": {"httpGet": {"port": 1}}}`, `path "/healthz/api/readyz"`},
		{`{"/app-health/api/readyz": {"httpGet": {"port": 1}}`, `invalid JSON`},
		{`[1,2]`, `invalid JSON`},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%s) = %v, want an error containing %s", c.doc, err, c.want)
		}
	}
}

func TestContainerOf(t *testing.T) {
	for path, want := range map[string]string{
		"/app-health/a/livez": "a", "/app-health/a-b/startupz": "a-b", "/app-lifecycle/x/poststartz": "x",
		"/app-health//livez": "", "/app-health/a/b/livez": "", "/app-lifecycle/x/livez": "", "/app-health/a/readyz/": "",
	} {
		c, _, ok := ContainerOf(path)
		if c != want || ok != (want != "") {
			t.Errorf("ContainerOf(%q) = %q, %v; want %q", path, c, ok, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"/app-health/web/livez": {"httpGet": {"path": "/h", "port": 8080}}}`))
	f.Add([]byte(`{"/app-health/web/readyz": {"tcpSocket": {"port": "x"}}}`))
	f.Add([]byte(`{"/app-lifecycle/a/prestopz": {"grpc": {"port": 1, "service": null}}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		got, err := Parse(doc)
		if err != nil {
			return
		}
		for path, a := range got {
			n := 0
			for _, set := range []bool{a.HTTP != nil, a.TCP != nil, a.GRPC != nil} {
				if set {
					n++
				}
			}
			if a.Path != path || n != 1 {
				t.Fatalf("inconsistent action for %q: %+v", path, a)
			}
			if _, err := New(Config{Actions: got}); err != nil {
				t.Fatalf("New rejected what Parse accepted: %v", err)
			}
		}
	})
}
