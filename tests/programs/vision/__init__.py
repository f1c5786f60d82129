"""Programs that import torch and torchvision themselves, as ordinary vision programs do.

Unlike the corpus above (whose programs receive the library as an argument), these run unchanged:
tests/test_vision_programs.py imports each one inside ``tapelab.install_aliases()``, so their
``import torch`` / ``import torchvision`` bind tapelab and tapelab.vision, and compares ``main()``'s
numbers with the ones real torch and torchvision gave (scripts/vision_references.py).
"""
