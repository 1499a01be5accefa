package client

// MaxSubRequests exposes maxSubRequests to the tests, which pin it to the server's default.
const MaxSubRequests = maxSubRequests
