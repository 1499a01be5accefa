// Package repolint holds repository-wide checks that run as tests: rules about the
// project's packages that no single package can check for itself (leak checks and -race
// for every package that starts goroutines, the patched third-party ZooKeeper client).
package repolint
