"""The keyed-backend contract suite: one set of tests over every backend x storage pair."""
