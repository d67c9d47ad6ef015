CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    email TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    password_hash TEXT
);

CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    venue TEXT NOT NULL,
    starts_at TEXT NOT NULL,
    tickets_total INTEGER NOT NULL CHECK (tickets_total >= 0),
    tickets_left INTEGER NOT NULL CHECK (tickets_left >= 0)
);

CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    user_id INTEGER NOT NULL REFERENCES users (id),
    event_id INTEGER NOT NULL REFERENCES events (id),
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    status TEXT NOT NULL CHECK (status IN ('held', 'paid', 'cancelled', 'expired')),
    created_at TEXT NOT NULL,
    hold_expires_at TEXT,
    cancelled_by TEXT
);

CREATE INDEX orders_user ON orders (user_id);
CREATE INDEX orders_hold ON orders (status, hold_expires_at);
