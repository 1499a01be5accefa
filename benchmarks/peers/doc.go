// Package peers runs the implementations a user would write instead of ours (peers) on the
// inputs of our kernel benchmarks, checks that they agree with our kernels, and reports
// their timings: Layout runs a vectorised NumPy layout forward and gradient (layout_numpy.py).
package peers
