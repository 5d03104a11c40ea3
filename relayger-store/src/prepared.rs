//! Hot statements kept as prepared statements on their connection.
//!
//! diesel caches a statement only when its query type says the SQL can be
//! reused: `sql_query`, `UPDATE`s and multi-row inserts all say no, so each
//! run re-parses and re-plans (a Parse round trip and planning CPU every
//! time). [`Cached`] says yes for a statement whose SQL text is fixed — the
//! cache is keyed by that text and its bind types, so two different texts
//! are never confused — and the pooled connection then prepares it once.
//!
//! Only wrap statements whose text takes a bounded number of shapes (a
//! constant, or a few variants): each distinct text is a cache entry for the
//! life of the connection.

use diesel::pg::Pg;
use diesel::query_builder::{AstPass, Query, QueryFragment, QueryId};
use diesel::result::QueryResult;

/// A statement the connection's prepared-statement cache keeps (see the
/// module documentation).
#[derive(Debug, Clone)]
pub(crate) struct Cached<Q>(Q);

impl<Q: QueryFragment<Pg>> QueryFragment<Pg> for Cached<Q> {
    fn walk_ast<'b>(&'b self, pass: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        self.0.walk_ast(pass)
    }

    fn is_safe_to_cache_prepared(&self, _backend: &Pg) -> QueryResult<bool> {
        Ok(true)
    }
}

impl<Q> QueryId for Cached<Q> {
    // No static id: the cache keys on the SQL text and bind types.
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<Q: Query> Query for Cached<Q> {
    type SqlType = Q::SqlType;
}

// diesel-async runs (`load`, `execute`…) what diesel marks as a statement.
impl<Q> diesel::query_dsl::RunQueryDslSupport for Cached<Q> {}

/// `.cached()` on any statement: see [`Cached`].
pub(crate) trait CachedExt: Sized {
    fn cached(self) -> Cached<Self> {
        Cached(self)
    }
}

impl<Q: QueryFragment<Pg>> CachedExt for Q {}

#[cfg(test)]
mod tests {
    use super::CachedExt;
    use crate::test_support::TestDatabase;
    use diesel::QueryableByName;
    use diesel::sql_types::{BigInt, Integer};
    use diesel_async::RunQueryDsl;

    #[derive(QueryableByName)]
    struct Count {
        #[diesel(sql_type = BigInt)]
        n: i64,
    }

    #[derive(QueryableByName)]
    struct Value {
        #[diesel(sql_type = Integer)]
        v: i32,
    }

    async fn prepared(conn: &mut diesel_async::AsyncPgConnection) -> i64 {
        diesel::sql_query("SELECT count(*) AS n FROM pg_prepared_statements")
            .get_result::<Count>(conn)
            .await
            .expect("pg_prepared_statements")
            .n
    }

    #[tokio::test]
    async fn a_cached_statement_is_prepared_once_and_an_uncached_one_never_kept() {
        let db = TestDatabase::create().await;
        let store = db.store().await;
        let mut conn = store.conn().await.expect("connection");
        let before = prepared(&mut conn).await;
        for v in 0..3 {
            let row: Value = diesel::sql_query("SELECT $1 + 0 AS v")
                .bind::<Integer, _>(v)
                .get_result(&mut conn)
                .await
                .expect("uncached");
            assert_eq!(row.v, v);
        }
        assert_eq!(prepared(&mut conn).await, before, "sql_query is not kept");
        for v in 0..3 {
            let row: Value = diesel::sql_query("SELECT $1 + 1 AS v")
                .bind::<Integer, _>(v)
                .cached()
                .get_result(&mut conn)
                .await
                .expect("cached");
            assert_eq!(row.v, v + 1, "binds still vary");
        }
        assert_eq!(
            prepared(&mut conn).await,
            before + 1,
            "three runs, one prepared statement"
        );
        // A different text is a different statement, never the first one.
        let row: Value = diesel::sql_query("SELECT $1 + 2 AS v")
            .bind::<Integer, _>(5)
            .cached()
            .get_result(&mut conn)
            .await
            .expect("second text");
        assert_eq!(row.v, 7);
        assert_eq!(prepared(&mut conn).await, before + 2);
    }
}
