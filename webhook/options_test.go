package webhook

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestValidateReportsEveryProblemAtOnce(t *testing.T) {
	o := NewOptions()
	o.TLSCertFile = "/etc/tls/tls.crt" // key missing
	o.ListenAddress = "8443"
	o.ResourceDomain = "Not A Domain"
	o.StaleAfter = 0
	o.TLSReloadInterval = -time.Second
	o.MaxRequestBytes = 100
	o.MaxInFlight = 0
	o.PublisherLeaseNamespace = ""
	o.ConfigFile, o.ConfigReloadInterval = "/etc/kube-reclaim/policy.yaml", 0
	err := o.Validate()
	if err == nil {
		t.Fatal("Validate accepted invalid flags")
	}
	for _, want := range []string{
		"--tls-cert-file and --tls-private-key-file are both required",
		"--listen-address",
		"--resource-domain",
		"--stale-after must be positive",
		"--tls-reload-interval must be positive",
		"--max-request-bytes must be at least 65536",
		"--max-in-flight must be at least 1",
		"--publisher-lease-namespace",
		"--config-reload-interval must be positive",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// validateCase changes the default Options; wants are substrings of
// Validate's error, and none means the result is valid.
type validateCase struct {
	name  string
	set   func(o *Options)
	wants []string
}

// testValidate runs Validate on NewOptions changed by each case.
func testValidate(t *testing.T, cases []validateCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := NewOptions()
			c.set(o)
			err := o.Validate()
			if len(c.wants) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate accepted invalid flags")
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	testValidate(t, []validateCase{
		{name: "certificate files", set: func(o *Options) { o.TLSCertFile, o.TLSKeyFile = "c", "k" }},
		{name: "defaults need certificate files", set: func(*Options) {},
			wants: []string{"--tls-cert-file and --tls-private-key-file are both required unless --self-signed"}},
		{name: "self-signed with the default service", set: func(o *Options) { o.SelfSigned = true }},
		{name: "self-signed for a URL clientConfig", set: func(o *Options) {
			o.SelfSigned, o.ServiceName, o.ServiceNamespace, o.ExtraSANs = true, "", "", []string{"127.0.0.1", "localhost"}
		}},
		{name: "self-signed with certificate files", set: func(o *Options) { o.SelfSigned, o.TLSCertFile = true, "c" },
			wants: []string{"cannot be combined"}},
		{name: "self-signed without any name", set: func(o *Options) { o.SelfSigned, o.ServiceName, o.ServiceNamespace = true, "", "" },
			wants: []string{"needs --service-name/--service-namespace or --extra-sans"}},
		{name: "self-signed with bad names", set: func(o *Options) {
			o.SelfSigned, o.ServiceNamespace, o.ExtraSANs, o.WebhookConfigurationName, o.CABundleResyncInterval = true, "", []string{"not a name!"}, "", 0
		}, wants: []string{"must both be set", "neither an IP address nor a DNS name", "--webhook-configuration-name", "--ca-bundle-resync-interval must be positive"}},
		{name: "lease tracking off", set: func(o *Options) {
			o.TLSCertFile, o.TLSKeyFile, o.PublisherLeaseName, o.PublisherLeaseNamespace = "c", "k", "", ""
		}},
		{name: "bad lease name", set: func(o *Options) { o.TLSCertFile, o.TLSKeyFile, o.PublisherLeaseName = "c", "k", "Bad_Name" },
			wants: []string{"--publisher-lease-name"}},
	})
}

func TestFlags(t *testing.T) {
	o := NewOptions()
	fs := pflag.NewFlagSet("webhook", pflag.ContinueOnError)
	o.AddFlags(fs)
	err := fs.Parse([]string{
		"--listen-address=127.0.0.1:9443", "--tls-cert-file=/c", "--tls-private-key-file=/k", "--tls-reload-interval=2s",
		"--stale-after=3m", "--publisher-lease-namespace=ns", "--publisher-lease-name=", "--max-request-bytes=1048576",
		"--self-signed", "--webhook-configuration-name=wh", "--service-name=svc", "--service-namespace=sns",
		"--extra-sans=127.0.0.1,localhost", "--ca-bundle-resync-interval=30s", "--resource-domain=example.org", "--health-address=:9091",
		"--max-in-flight=3", "--oversell=true",
	})
	if err != nil {
		t.Fatal(err)
	}
	if o.ListenAddress != "127.0.0.1:9443" || o.TLSCertFile != "/c" || o.TLSKeyFile != "/k" || o.TLSReloadInterval != 2*time.Second ||
		o.StaleAfter != 3*time.Minute || o.PublisherLeaseNamespace != "ns" || o.PublisherLeaseName != "" || o.MaxRequestBytes != 1<<20 ||
		!o.SelfSigned || o.WebhookConfigurationName != "wh" || o.ServiceName != "svc" || o.ServiceNamespace != "sns" ||
		len(o.ExtraSANs) != 2 || o.CABundleResyncInterval != 30*time.Second || o.ResourceDomain != "example.org" || o.HealthAddress != ":9091" ||
		o.MaxInFlight != 3 || !o.Oversell {
		t.Errorf("parsed options: %+v", o)
	}
}

func TestDefaults(t *testing.T) {
	o := NewOptions()
	if o.ListenAddress != ":8443" || o.HealthAddress != ":8081" || o.StaleAfter != 10*time.Minute ||
		o.PublisherLeaseNamespace != "kube-reclaim" || o.PublisherLeaseName != "kube-reclaim-publisher" ||
		o.MaxRequestBytes != 3<<20 || o.WebhookConfigurationName != "kube-reclaim-webhook" || o.SelfSigned ||
		o.MaxInFlight != DefaultMaxInFlight || o.Oversell {
		t.Errorf("defaults: %+v", o)
	}
}

func TestValidateCASecretFlags(t *testing.T) {
	testValidate(t, []validateCase{
		{name: "shared CA", set: func(o *Options) { o.SelfSigned, o.CASecretName = true, "kube-reclaim-webhook-ca" }},
		{name: "in-memory CA", set: func(o *Options) { o.SelfSigned = true }},
		{name: "ignored without --self-signed", set: func(o *Options) {
			o.TLSCertFile, o.TLSKeyFile, o.CASecretName, o.CASecretNamespace = "c", "k", "Not_A_Name", ""
		}},
		{name: "bad names reported together", set: func(o *Options) {
			o.SelfSigned, o.CASecretName, o.CASecretNamespace, o.ExtraSANs = true, "Not_A_Name", "", []string{"not a name!"}
		}, wants: []string{"--ca-secret-name \"Not_A_Name\"", "--ca-secret-namespace \"\"", "--extra-sans"}},
	})
}
