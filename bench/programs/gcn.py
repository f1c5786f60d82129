"""Kipf and Welling's 2-layer GCN on a random 2000-node graph (sparse COO adjacency, full-batch),
Adam with weight decay, for a fixed number of epochs."""
import _program
import models

if __name__ == "__main__":
    _program.run(__doc__, models.gcn_step, lambda rng, n: [None] * n)
