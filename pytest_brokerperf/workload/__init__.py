"""The OMB workload: its declared file model, keys, cross-key checks, payloads and rate
schedule.
"""
