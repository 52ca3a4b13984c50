// Package secretfile refuses a credential file that users other than
// evictd's own can read or change, the way ssh refuses a private key.
package secretfile
