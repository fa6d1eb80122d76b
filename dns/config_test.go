package dns

import (
	"strings"
	"testing"
	"time"
)

func TestNewRejectsBadConfig(t *testing.T) {
	rc := writeResolvConf(t, nil, "")
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{ResolvConf: rc, Addr: "no-port"}, "no-port"},
		{Config{ResolvConf: rc, ForwardTimeout: -time.Second}, "ForwardTimeout"},
		{Config{ResolvConf: rc, MaxConcurrentForwards: -1}, "MaxConcurrentForwards"},
		{Config{ResolvConf: rc + ".missing"}, "resolv.conf"},
	} {
		if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v) = %v, want an error naming %q", c.cfg, err, c.want)
		}
	}
	s, err := New(Config{ResolvConf: rc})
	if err != nil {
		t.Fatal(err)
	}
	if s.cfg.Addr != DefaultAddr || s.cfg.ForwardTimeout != DefaultForwardTimeout ||
		cap(s.forwards) != DefaultMaxConcurrentForwards {
		t.Fatalf("defaults not applied: %+v", s.cfg)
	}
	if got := localhostIPs(nil); len(got) != 1 || got[0] != "127.0.0.1" {
		t.Fatalf("localhost without nameservers binds %v", got)
	}
}
