use thiserror::Error;

/// Everything the store can fail with. The API layer maps these to the wire
/// error envelope in one place.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("database query failed: {0}")]
    Query(#[from] diesel::result::Error),
    #[error("cannot connect to the database: {0}")]
    Connect(String),
    #[error("the database connection pool is exhausted or unavailable: {0}")]
    Pool(String),
    #[error("database migrations failed: {0}")]
    Migration(String),
}

impl From<diesel_async::pooled_connection::deadpool::PoolError> for StoreError {
    fn from(err: diesel_async::pooled_connection::deadpool::PoolError) -> Self {
        StoreError::Pool(err.to_string())
    }
}

impl From<diesel::ConnectionError> for StoreError {
    fn from(err: diesel::ConnectionError) -> Self {
        StoreError::Connect(err.to_string())
    }
}
