package extender

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestOptionsDefaults(t *testing.T) {
	o := NewOptions()
	fs := pflag.NewFlagSet("extender", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{
		"listen-address": "127.0.0.1:8888", "scheduler-name": "[kube-reclaim-scheduler]", "health-address": ":8082", "stale-after": "10m0s", "strategy": "spread",
		"assume-timeout": "30s", "publisher-lease-namespace": "kube-reclaim", "publisher-lease-name": "kube-reclaim-publisher",
		"tls-cert-file": "", "tls-private-key-file": "", "resource-domain": "kube-reclaim.io", "max-in-flight": "32",
		"max-in-flight-binds": "256",
	} {
		f := fs.Lookup(flag)
		if f == nil {
			t.Errorf("no --%s", flag)
			continue
		}
		if f.DefValue != want {
			t.Errorf("--%s default %q, want %q", flag, f.DefValue, want)
		}
	}
	if err := o.Validate(); err != nil {
		t.Errorf("defaults invalid: %v", err)
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want []string // every one must be reported; none means valid
	}{
		{"binpack over HTTPS is valid", []string{"--strategy=binpack", "--tls-cert-file=c", "--tls-private-key-file=k"}, nil},
		{"an empty lease name disables the lease check", []string{"--publisher-lease-name="}, nil},
		{"several scheduler names, repeated or comma-separated", []string{"--scheduler-name=default-scheduler", "--scheduler-name=a,b"}, nil},
		{"no scheduler name", []string{"--scheduler-name="}, []string{"--scheduler-name: at least one scheduler name is required"}},
		{"an empty scheduler name", []string{"--scheduler-name=a,,b"}, []string{"--scheduler-name: a scheduler name must not be empty"}},
		{"every problem is reported at once", []string{
			"--strategy=random", "--stale-after=0s", "--assume-timeout=-1s", "--listen-address=8888",
			"--tls-cert-file=c", "--resource-domain=UPPER", "--publisher-lease-namespace=Bad_NS", "--max-in-flight=0",
			"--max-in-flight-binds=-1",
		}, []string{
			"--max-in-flight must be positive, got 0",
			"--max-in-flight-binds must be positive, got -1",
			`--strategy: "random" is neither spread nor binpack`,
			"--stale-after must be positive",
			"--assume-timeout must be positive",
			`--listen-address: "8888" is not host:port`,
			"--tls-cert-file and --tls-private-key-file must be set together",
			"--resource-domain",
			`--publisher-lease-namespace "Bad_NS"`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOptions()
			fs := pflag.NewFlagSet("extender", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := o.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Errorf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate() = nil")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
	o := NewOptions()
	fs := pflag.NewFlagSet("extender", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse([]string{"--scheduler-name=default-scheduler", "--scheduler-name=a,b"}); err != nil || !reflect.DeepEqual(o.SchedulerNames, []string{"default-scheduler", "a", "b"}) {
		t.Errorf("--scheduler-name parsed to %q (%v)", o.SchedulerNames, err)
	}
	if o := NewOptions(); o.AssumeTimeout != 30*time.Second || o.Strategy != StrategySpread {
		t.Errorf("NewOptions() = %+v", o)
	}
}
