// Package childproc runs the daemons tests start (etcd, kube-apiserver,
// containerd): output appended to a log file, killed with the test process
// if it dies, and stopped by PID — never by name.
package childproc
