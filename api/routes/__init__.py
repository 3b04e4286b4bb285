"""One router per resource; each route a few lines over one library call."""
