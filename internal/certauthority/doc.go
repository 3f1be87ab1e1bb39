// Package certauthority is the project's certificate authority: ECDSA P-256
// keys, CA and leaf certificate templates (NewCA, CA.Issue), their PEM, and
// the rules of a serving certificate's life (RenewalDue, CheckExpiry).
//
// On it stand the webhook's --self-signed serving certificate (SelfSigned:
// a CA in memory, or shared by every replica through a Secret of type
// kubernetes.io/tls that Secret creates, reuses and rotates) and the test
// cluster's certificates (test/cluster). Patching a caBundle into a webhook
// configuration is the webhook's business, not this package's; NewestCA
// gives it the rule it needs to never take a newer CA of ours out of one.
package certauthority
