"""WebShop environment: catalogue, search, reward, page state machine and HTTP routes."""
