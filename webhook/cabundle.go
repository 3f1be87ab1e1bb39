package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	admissionregistrationclient "k8s.io/client-go/kubernetes/typed/admissionregistration/v1"

	"github.com/kube-reclaim/kube-reclaim/internal/certauthority"
)

// ServiceHosts returns the DNS names under which the apiserver reaches the
// Service namespace/name.
func ServiceHosts(namespace, name string) []string {
	if name == "" || namespace == "" {
		return nil
	}
	return []string{
		name + "." + namespace + ".svc",
		name,
		name + "." + namespace,
		name + "." + namespace + ".svc.cluster.local",
	}
}

// EnsureCABundle sets caBundle on every webhook of the MutatingWebhookConfiguration
// name that does not carry it already, with one Update (optimistic
// concurrency: a conflict is an error, retried by the caller). It reports
// whether it changed anything.
func EnsureCABundle(ctx context.Context, client admissionregistrationclient.MutatingWebhookConfigurationsGetter, name string, caBundle []byte) (bool, error) {
	return ensureCABundle(ctx, client, name, caBundle, false)
}

// errStaleCA: the configuration already trusts a newer CA of ours than the
// bundle a replica wanted to write.
var errStaleCA = errors.New("the caBundle holds a newer kube-reclaim CA than this replica knows; re-reading the CA Secret")

// ensureCABundle is EnsureCABundle; with monotonic it refuses to replace a
// bundle that holds a CA of ours newer than any in caBundle. Replicas sharing
// a CA Secret may read it on either side of a rotation: the one that read it
// before must not take the new CA out of the bundle while the one that
// rotated already serves a certificate signed by it.
func ensureCABundle(ctx context.Context, client admissionregistrationclient.MutatingWebhookConfigurationsGetter, name string, caBundle []byte, monotonic bool) (bool, error) {
	cfg, err := client.MutatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	if len(cfg.Webhooks) == 0 {
		return false, fmt.Errorf("MutatingWebhookConfiguration %s has no webhooks", name)
	}
	changed := false
	for i := range cfg.Webhooks {
		current := cfg.Webhooks[i].ClientConfig.CABundle
		if bytes.Equal(current, caBundle) {
			continue
		}
		if monotonic && certauthority.NewestCA(current).After(certauthority.NewestCA(caBundle)) {
			return false, errStaleCA
		}
		cfg.Webhooks[i].ClientConfig.CABundle = caBundle
		changed = true
	}
	if !changed {
		return false, nil
	}
	_, err = client.MutatingWebhookConfigurations().Update(ctx, cfg, metav1.UpdateOptions{FieldManager: "kube-reclaim-webhook"})
	return err == nil, err
}

// caBundleKeeper keeps the caBundle patched: retrying quickly (backoff up to
// resync) until the configuration exists and is patched, then checking every
// resync in case someone reset it. It also renews the serving certificate
// and, with a CA Secret, reads the Secret every resync (creating or rotating
// it when due) and moves to the CA it holds.
type caBundleKeeper struct {
	client  admissionregistrationclient.MutatingWebhookConfigurationsGetter
	name    string
	certs   *certauthority.SelfSigned
	secret  *certauthority.Secret // nil: the CA is the in-memory one of certs
	resync  time.Duration
	retry   time.Duration // first retry delay; 0 means one second
	patched atomic.Bool
}

func (k *caBundleKeeper) check() error {
	if !k.patched.Load() {
		return fmt.Errorf("caBundle of MutatingWebhookConfiguration %s not patched yet", k.name)
	}
	return nil
}

// sync does one round: CA Secret, serving certificate, caBundle.
func (k *caBundleKeeper) sync(ctx context.Context, log logrus.FieldLogger) error {
	if k.secret != nil {
		ca, err := k.secret.Ensure(ctx)
		if err != nil {
			// Keep serving what this replica has: its certificate is
			// still trusted by the bundle it patched.
			return fmt.Errorf("CA Secret: %w", err)
		}
		if !k.certs.Uses(ca) {
			// The apiserver must trust the new CA before this replica
			// serves a certificate signed by it, or its calls here fail.
			if _, err := ensureCABundle(ctx, k.client, k.name, ca.Bundle, true); err != nil {
				return err
			}
			if err := k.certs.Use(ca, time.Now()); err != nil {
				return err
			}
			log.WithFields(logrus.Fields{"caSerial": ca.Cert.SerialNumber.String(), "caNotAfter": ca.Cert.NotAfter,
				"serial": k.certs.Leaf().SerialNumber.String()}).Info("serving a certificate from the CA of the Secret")
		}
	}
	if renewed, err := k.certs.RenewIfDue(time.Now()); err != nil {
		log.WithError(err).Error("renewing the self-signed serving certificate")
	} else if renewed {
		log.WithField("serial", k.certs.Leaf().SerialNumber.String()).Info("self-signed serving certificate renewed")
	}
	changed, err := ensureCABundle(ctx, k.client, k.name, k.certs.CABundle(), k.secret != nil)
	if err != nil {
		return err
	}
	if changed {
		log.Info("webhook caBundle patched")
	}
	return nil
}

func (k *caBundleKeeper) run(ctx context.Context) {
	log := logrus.WithField("webhookConfiguration", k.name)
	first := k.retry
	if first <= 0 {
		first = time.Second
	}
	backoff := first
	for {
		wait := k.resync
		if err := k.sync(ctx, log); err != nil {
			log.WithError(err).Warn("cannot keep the webhook certificate and caBundle up to date yet; retrying")
			wait = min(backoff, k.resync)
			backoff *= 2
		} else {
			k.patched.Store(true)
			backoff = first
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}
