"""A corpus of ordinary PyTorch training programs, written for tapelab's tests (issue 14).

Each program is a module with ``main(torch, steps, **options)`` that receives the library as an
argument (the real ``torch`` or ``tapelab``), trains for ``steps`` (epochs, batches or outer
iterations, as the program says) and returns the list of numbers it would print: losses,
accuracies, validation scores. The code inside is what a researcher writes against PyTorch:
it reaches everything through ``torch.`` (``torch.nn``, ``torch.optim``, ``torch.utils.data``)
and never asks which library it has.

Both runs start from the same state: data comes from numpy, and ``_common.seed_weights`` writes
numpy-drawn values into the parameters after the model is built (the libraries' own random
streams differ). Randomness inside training (VAE noise, GAN latents) is drawn from numpy too.
``tests/test_programs.py`` runs every program under both libraries and compares the lists.
"""

PROGRAMS = ("cnn_classifier", "rnn_lm", "vae", "dcgan", "gpt", "transformer_lm", "gcn",
            "resnet_surgery", "lbfgs_fit", "autograd_basics", "scientific")
