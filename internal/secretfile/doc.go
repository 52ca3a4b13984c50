// Package secretfile refuses a credential file that users other than
// evictd's own can read or change, or swap through a directory on its
// path, the way ssh refuses a private key (StrictModes).
package secretfile
