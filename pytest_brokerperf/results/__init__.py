"""What a run leaves: the result record, the OMB result JSON, the ladder's record, live
artefacts and headline figures.
"""
