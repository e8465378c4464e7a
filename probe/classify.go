package probe

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"

	"golang.org/x/net/http2"

	"github.com/rlprobe/rlprobe/record"
)

// classedError is an error whose record class is known where it happened
// (a TLS handshake failure, for instance).
type classedError struct {
	class string
	err   error
}

func (e *classedError) Error() string { return e.err.Error() }
func (e *classedError) Unwrap() error { return e.err }

// withClass wraps err so that classify returns class, unless err is a
// timeout, which stays a timeout whatever the step that timed out.
func withClass(class string, err error) error {
	if isTimeout(err) {
		return err
	}
	return &classedError{class: class, err: err}
}

// isTimeout reports whether err is a deadline or timeout.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// classify returns the record error class (record.ErrRefused …) of a
// transport error.
func classify(err error) string {
	var ce *classedError
	if errors.As(err, &ce) {
		return ce.class
	}
	if isTimeout(err) {
		return record.ErrTimeout
	}
	// HTTP/2: a header list over our SETTINGS_MAX_HEADER_LIST_SIZE
	// (http2.Transport's error is unexported), or a single field longer
	// than it, which the HPACK decoder refuses as a COMPRESSION_ERROR (the
	// only other cause, a broken encoder, is far rarer than a big header).
	var connErr http2.ConnectionError
	if strings.Contains(err.Error(), "response header list larger than") ||
		(errors.As(err, &connErr) && http2.ErrCode(connErr) == http2.ErrCodeCompression) {
		return record.ErrHeaderTooLarge
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return record.ErrDNS
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return record.ErrRefused
	}
	var (
		recErr   *tls.RecordHeaderError
		alertErr tls.AlertError
		verErr   *tls.CertificateVerificationError
		uaErr    x509.UnknownAuthorityError
		hostErr  x509.HostnameError
		invErr   x509.CertificateInvalidError
	)
	if errors.As(err, &recErr) || errors.As(err, &alertErr) || errors.As(err, &verErr) ||
		errors.As(err, &uaErr) || errors.As(err, &hostErr) || errors.As(err, &invErr) {
		return record.ErrTLS
	}
	var (
		streamErr http2.StreamError
		goAwayErr http2.GoAwayError
	)
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, syscall.ECONNABORTED) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.ErrClosedPipe) ||
		errors.As(err, &streamErr) || errors.As(err, &goAwayErr) ||
		strings.Contains(err.Error(), "connection lost") {
		return record.ErrReset
	}
	return record.ErrOther
}
