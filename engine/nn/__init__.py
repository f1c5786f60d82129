"""Neural-network modules, functional ops and initialisers (torch.nn)."""
