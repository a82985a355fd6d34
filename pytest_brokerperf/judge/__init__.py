"""Every validity rule in one place (is a figure the broker's or the harness's?), the
throughput ladder's judgement, and the SLOs.
"""
