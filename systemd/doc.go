// Package systemd tells systemd how evictd is doing through the sd_notify
// protocol (ready, stopping, status, watchdog pings) and takes the socket
// systemd passes by socket activation; the same directory holds evictd's
// units, their drop-in examples and its environment file.
package systemd
