// Package systemd tells systemd how evictd is doing through the sd_notify
// protocol (ready, stopping, status, watchdog pings); the same directory
// holds evictd's unit file and its environment file.
package systemd
