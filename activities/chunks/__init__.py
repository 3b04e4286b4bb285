"""Long work in fenced chunks, each committed alone (`chunked`), and the test-only pause
point between chunks (`gate`).
"""
