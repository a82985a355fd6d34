"""What every layer may use: errors and warnings, the rule for secrets, and the shipped
data files.
"""
