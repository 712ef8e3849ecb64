//go:build unix

package client

import (
	"errors"
	"net"
	"syscall"
)

// open reports whether an idle connection is still open: a non-blocking
// peek finds nothing to read yet. End of stream (the server closed it), an
// error, or bytes nobody asked for all mean it must not carry a request.
func open(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	alive := false
	var buf [1]byte
	err = rc.Read(func(fd uintptr) bool {
		_, _, rerr := syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		alive = errors.Is(rerr, syscall.EAGAIN) || errors.Is(rerr, syscall.EWOULDBLOCK)
		return true // never wait for readiness
	})
	return err == nil && alive
}
