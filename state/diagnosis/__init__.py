"""Root causes of member removals: the rules (rules.py), removals held per group until their
decision time (holding.py), and the cross-group correlator on the driver (correlate.py)."""
