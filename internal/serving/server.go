package serving

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/sirupsen/logrus"
)

// ShutdownTimeout bounds how long in-flight requests may take to finish.
const ShutdownTimeout = 10 * time.Second

// NewServer returns an http.Server with timeouts suitable for a control-plane
// component: slow or stuck clients must not pin goroutines forever.
func NewServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// ListenAndServe listens on srv.Addr (over TLS when tlsConfig is not nil)
// and serves until ctx ends, then shuts down gracefully.
func ListenAndServe(ctx context.Context, srv *http.Server, tlsConfig *tls.Config) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", srv.Addr)
	if err != nil {
		return err
	}
	return Serve(ctx, srv, ln, tlsConfig)
}

// Serve is ListenAndServe on an existing listener (tests pass port 0 listeners).
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, tlsConfig *tls.Config) error {
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
	}
	log := logrus.WithField("address", ln.Addr().String())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.WithField("tls", tlsConfig != nil).Info("serving")
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if e := <-errc; e != nil && !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	log.Info("stopped serving")
	return err
}
