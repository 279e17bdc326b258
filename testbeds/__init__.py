"""Servers scripted for measuring phasetop itself: the tests and the benchmarks both run them."""
